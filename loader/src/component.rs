//! Components: verified wasm modules with their manifests, and the registry a system loads
//! them from.

use std::collections::BTreeMap;
use std::sync::Arc;

use domos_abi::{Grant, HostCall};

use crate::bounded;
use crate::codegen::Translator;
use crate::manifest::Manifest;
use crate::verifier::{self, HeapKind, Kind};

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
    /// The threaded build with its stack guard (`stack_guard::instrument`), ready to translate.
    bytes: Arc<[u8]>,
    /// The single-threaded build, for interpreted domains, likewise.
    single: Option<Arc<[u8]>>,
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
        let verified = verifier::verify(bytes, HeapKind::Shared)?;
        let manifest = Manifest::parse(&verified.manifest_text).map_err(|e| format!("bad manifest: {e}"))?;
        let bounded = bounded::check_all(bytes, &manifest.bounded).map_err(|e| format!("bounded export {e}"))?;
        Ok(Component {
            manifest,
            host_calls: verified.host_calls.into_iter().collect(),
            has_main: verified.has_main,
            kind: verified.kind,
            bounded,
            bytes: crate::stack_guard::instrument(bytes)?.into(),
            single: None,
        })
    }

    /// Adds the single-threaded build of the same component, which interpreted domains run.
    ///
    /// # Errors
    /// When it fails verification, or its manifest, entry points or host calls differ.
    pub fn with_single_build(mut self, bytes: &[u8]) -> Result<Component, String> {
        let verified = verifier::verify(bytes, HeapKind::Single).map_err(|e| format!("single-threaded build: {e}"))?;
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
        self.single = Some(crate::stack_guard::instrument(bytes)?.into());
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
            .filter(|call| HostCall::named(call).is_some_and(|c| c.grant != Grant::Basic && !grants.contains(&c.grant)))
            .map(String::as_str)
            .collect()
    }

    /// The bytes to translate for `translator`: the threaded build for Cranelift, the
    /// single-threaded one for Pulley, each with its stack guard.
    ///
    /// # Errors
    /// When the component has no single-threaded build and Pulley is asked for.
    pub fn code(&self, translator: Translator) -> Result<&[u8], String> {
        match translator {
            Translator::Cranelift => Ok(&self.bytes),
            Translator::Pulley => self.single.as_deref().ok_or_else(|| {
                format!(
                    "component {} has no single-threaded build, which the pulley translator needs",
                    self.manifest.name
                )
            }),
        }
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
