//! Components: verified wasm modules with their manifests, and the registry a system loads
//! them from.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use wasmtime::{Engine, Module};

use crate::manifest::Manifest;
use crate::translator::Translator;
use crate::verifier::{self, Grant};

/// A loaded, verified component.
pub struct Component {
    /// What the component says about itself.
    pub manifest: Manifest,
    /// The host calls it imports.
    pub host_calls: Vec<String>,
    /// Whether it has a `main` entry point.
    pub has_main: bool,
    bytes: Arc<[u8]>,
    modules: [OnceLock<Module>; 2],
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Component({} {})",
            self.manifest.name, self.manifest.version
        )
    }
}

impl Component {
    /// Validates, verifies and reads the manifest of a wasm module.
    ///
    /// # Errors
    /// Why the module is not an acceptable component.
    pub fn load(bytes: &[u8]) -> Result<Component, String> {
        let verified = verifier::verify(bytes, |name| crate::host::grant_of(name).is_some())?;
        let manifest =
            Manifest::parse(&verified.manifest_text).map_err(|e| format!("bad manifest: {e}"))?;
        Ok(Component {
            manifest,
            host_calls: verified.host_calls.into_iter().collect(),
            has_main: verified.has_main,
            bytes: bytes.into(),
            modules: [OnceLock::new(), OnceLock::new()],
        })
    }

    /// The host calls this component imports that `grants` do not cover.
    pub fn ungranted_calls(&self, grants: &[Grant]) -> Vec<&str> {
        self.host_calls
            .iter()
            .filter(|call| {
                crate::host::grant_of(call)
                    .is_some_and(|g| g != Grant::Basic && !grants.contains(&g))
            })
            .map(String::as_str)
            .collect()
    }

    /// The module translated by `translator`, compiled on first use.
    ///
    /// # Errors
    /// When translation fails.
    pub fn module(&self, translator: Translator, engine: &Engine) -> Result<Module, String> {
        if let Some(module) = self.modules[translator.index()].get() {
            return Ok(module.clone());
        }
        let module = Module::new(engine, &self.bytes).map_err(|e| {
            format!(
                "{} translation of {} failed: {e:#}",
                translator.name(),
                self.manifest.name
            )
        })?;
        Ok(self.modules[translator.index()]
            .get_or_init(|| module)
            .clone())
    }
}

/// The components a system can use, by name.
#[derive(Default)]
pub struct ComponentRegistry {
    components: BTreeMap<String, Arc<Component>>,
}

impl ComponentRegistry {
    /// Loads a component and registers it under its manifest name.
    ///
    /// # Errors
    /// Why the module was rejected, prefixed with `origin` (a file or embedded name).
    pub fn add(&mut self, origin: &str, bytes: &[u8]) -> Result<Arc<Component>, String> {
        let component =
            Arc::new(Component::load(bytes).map_err(|e| format!("component {origin}: {e}"))?);
        self.components
            .insert(component.manifest.name.clone(), component.clone());
        Ok(component)
    }

    /// The component called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Component>> {
        self.components.get(name)
    }

    /// Every component's name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.components.keys().map(String::as_str)
    }
}
