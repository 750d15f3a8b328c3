//! Components: verified wasm modules with their manifests, and the registry a system loads
//! them from.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use wasmtime::{Engine, Module};

use crate::bounded;
use crate::manifest::Manifest;
use crate::translator::{CodeGen, Translator};
use crate::verifier::{self, Grant, HeapKind, Kind};

/// A loaded, verified component.
pub struct Component {
    /// What the component says about itself.
    pub manifest: Manifest,
    /// The host calls it imports.
    pub host_calls: Vec<String>,
    /// Whether it has a `main` entry point.
    pub has_main: bool,
    /// Whether it is an ordinary component or a scheduler.
    pub kind: Kind,
    /// The exports the manifest lists as `bounded`, each with the most wasm instructions one
    /// call of it executes (the larger of the two builds' bounds), as `bounded::check` proved.
    pub bounded: Vec<(String, u64)>,
    bytes: Arc<[u8]>,
    /// The single-threaded build, for interpreted domains.
    single: Option<Arc<[u8]>>,
    modules: [OnceLock<Module>; CodeGen::COUNT],
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Component({} {})", self.manifest.name, self.manifest.version)
    }
}

impl Component {
    /// Validates, verifies and reads the manifest of a wasm module.
    ///
    /// # Errors
    /// Why the module is not an acceptable component.
    pub fn load(bytes: &[u8]) -> Result<Component, String> {
        let verified = verifier::verify(bytes, HeapKind::Shared, |name| crate::host::grant_of(name).is_some())?;
        let manifest = Manifest::parse(&verified.manifest_text).map_err(|e| format!("bad manifest: {e}"))?;
        let bounded = bounded::check_all(bytes, &manifest.bounded).map_err(|e| format!("bounded export {e}"))?;
        Ok(Component {
            manifest,
            host_calls: verified.host_calls.into_iter().collect(),
            has_main: verified.has_main,
            kind: verified.kind,
            bounded,
            bytes: bytes.into(),
            single: None,
            modules: std::array::from_fn(|_| OnceLock::new()),
        })
    }

    /// Adds the single-threaded build of the same component, which interpreted domains run.
    ///
    /// # Errors
    /// When it fails verification, or its manifest, entry points or host calls differ.
    pub fn with_single_build(mut self, bytes: &[u8]) -> Result<Component, String> {
        let verified = verifier::verify(bytes, HeapKind::Single, |name| crate::host::grant_of(name).is_some())
            .map_err(|e| format!("single-threaded build: {e}"))?;
        let manifest = Manifest::parse(&verified.manifest_text)
            .map_err(|e| format!("single-threaded build: bad manifest: {e}"))?;
        if manifest != self.manifest || verified.has_main != self.has_main || verified.kind != self.kind {
            return Err("the single-threaded build is not the same component".into());
        }
        if let Some(extra) = verified.host_calls.iter().find(|c| !self.host_calls.contains(c)) {
            return Err(format!("the single-threaded build imports {extra}, which the threaded build does not"));
        }
        let bounded = bounded::check_all(bytes, &manifest.bounded)
            .map_err(|e| format!("single-threaded build: bounded export {e}"))?;
        for ((_, bound), (_, single)) in self.bounded.iter_mut().zip(bounded) {
            *bound = (*bound).max(single);
        }
        self.single = Some(bytes.into());
        Ok(self)
    }

    /// Whether an interpreted domain can run this component.
    pub fn has_single_build(&self) -> bool {
        self.single.is_some()
    }

    /// The host calls this component imports that `grants` do not cover.
    pub fn ungranted_calls(&self, grants: &[Grant]) -> Vec<&str> {
        self.host_calls
            .iter()
            .filter(|call| crate::host::grant_of(call).is_some_and(|g| g != Grant::Basic && !grants.contains(&g)))
            .map(String::as_str)
            .collect()
    }

    /// The module translated as `code` says for `engine`, compiled on first use. Only the
    /// first engine's translation is kept: another kernel sharing the registry translates anew.
    ///
    /// # Errors
    /// When translation fails.
    pub fn module(&self, code: CodeGen, engine: &Engine) -> Result<Module, String> {
        let cached = &self.modules[code.index()];
        if let Some(module) = cached.get().filter(|m| Engine::same(m.engine(), engine)) {
            return Ok(module.clone());
        }
        let bytes = match code.translator {
            Translator::Cranelift => &self.bytes,
            Translator::Pulley => self.single.as_ref().ok_or_else(|| {
                format!(
                    "component {} has no single-threaded build, which the pulley translator needs",
                    self.manifest.name
                )
            })?,
        };
        let guarded = crate::stack_guard::instrument(bytes)?;
        let module = Module::new(engine, &guarded)
            .map_err(|e| format!("{} translation of {} failed: {e:#}", code.describe(), self.manifest.name))?;
        let kept = cached.get_or_init(|| module.clone());
        Ok(if Engine::same(kept.engine(), engine) { kept.clone() } else { module })
    }
}

/// The components a system can use, by name.
#[derive(Default, Clone)]
pub struct ComponentRegistry {
    components: BTreeMap<String, Arc<Component>>,
}

impl ComponentRegistry {
    /// Loads a component and registers it under its manifest name.
    ///
    /// # Errors
    /// Why the module was rejected, prefixed with `origin` (a file or embedded name).
    pub fn add(&mut self, origin: &str, bytes: &[u8]) -> Result<Arc<Component>, String> {
        self.insert(Component::load(bytes).map_err(|e| format!("component {origin}: {e}"))?)
    }

    /// Loads a component with its threaded build and its single-threaded build (for interpreted
    /// domains) and registers it.
    ///
    /// # Errors
    /// As for `add`, and when the two builds disagree.
    pub fn add_pair(&mut self, origin: &str, threaded: &[u8], single: &[u8]) -> Result<Arc<Component>, String> {
        let component = Component::load(threaded)
            .and_then(|c| c.with_single_build(single))
            .map_err(|e| format!("component {origin}: {e}"))?;
        self.insert(component)
    }

    fn insert(&mut self, component: Component) -> Result<Arc<Component>, String> {
        let component = Arc::new(component);
        self.components.insert(component.manifest.name.clone(), component.clone());
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
