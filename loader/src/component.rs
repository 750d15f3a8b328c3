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
    /// The waits of its threaded build's start function, which the kernel makes return when it
    /// terminates the component's domain.
    pub start_waits: Vec<verifier::StartWait>,
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
        // `verify` validated the module already.
        let bounded = bounded::check_all_valid(bytes, &manifest.bounded).map_err(|e| format!("bounded export {e}"))?;
        Ok(Component {
            manifest,
            host_calls: verified.host_calls.into_iter().collect(),
            has_main: verified.has_main,
            start_waits: verified.start_waits,
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
        let differences: Vec<String> = self
            .manifest
            .differences(&manifest)
            .into_iter()
            .map(|(key, threaded, single)| {
                format!("{key} ({threaded} in the threaded build, {single} in the single-threaded one)")
            })
            .collect();
        if !differences.is_empty() {
            return Err(format!("the manifests of the two builds differ: {}", differences.join("; ")));
        }
        if verified.has_main != self.has_main || verified.kind != self.kind {
            return Err("the single-threaded build has other entry points than the threaded build".into());
        }
        if let Some(extra) = verified.host_calls.iter().find(|c| !self.host_calls.contains(c)) {
            return Err(format!("the single-threaded build imports {extra}, which the threaded build does not"));
        }
        // `verify` validated it already, with fewer features than the threaded build's.
        let bounded = bounded::check_all_valid(bytes, &manifest.bounded)
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

/// The components a system can use, by name, each with where it came from.
#[derive(Default, Clone)]
pub struct ComponentRegistry {
    components: BTreeMap<String, (String, Arc<Component>)>,
}

impl ComponentRegistry {
    /// Loads a component and registers it under its manifest name.
    ///
    /// # Errors
    /// Why the module was rejected, prefixed with `origin` (a file or embedded name); a name the
    /// registry holds already, naming both components.
    pub fn add(&mut self, origin: &str, bytes: &[u8]) -> Result<Arc<Component>, String> {
        let component = Component::load(bytes).map_err(|e| format!("component {origin}: {e}"))?;
        self.insert(origin, component)
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
        self.insert(origin, component)
    }

    /// Registers a verified component under its manifest name.
    ///
    /// # Errors
    /// When the registry holds a component of that name already: two components of one name
    /// would leave a configuration that names it ambiguous.
    pub fn insert(&mut self, origin: &str, component: Component) -> Result<Arc<Component>, String> {
        let name = component.manifest.name.clone();
        if let Some((other, _)) = self.components.get(&name) {
            return Err(format!(
                "component {origin} is called {name}, as is component {other}: a system holds one component \
                 of each name (rename one in its manifest)"
            ));
        }
        let component = Arc::new(component);
        self.components.insert(name, (origin.to_string(), component.clone()));
        Ok(component)
    }

    /// The component called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Component>> {
        self.components.get(name).map(|(_, c)| c)
    }

    /// Where the component called `name` came from, as given when it was added.
    pub fn origin(&self, name: &str) -> Option<&str> {
        self.components.get(name).map(|(origin, _)| origin.as_str())
    }

    /// Every component's name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.components.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(manifest: &str, memory: &str) -> Vec<u8> {
        module_with(manifest, memory, "")
    }

    /// A component with `extra` definitions beside its entry points.
    fn module_with(manifest: &str, memory: &str, extra: &str) -> Vec<u8> {
        let manifest = manifest.replace('"', "\\\"").replace('\n', "\\n");
        wat::parse_str(format!(
            r#"(module (import "env" "memory" (memory 1 65536 {memory}))
               (global (export "__stack_pointer") (mut i32) (i32.const 65536))
               (func (export "domos_init") (result i32) i32.const 0)
               (func (export "domos_thread_entry") (param i32) (result i32) i32.const 0)
               (func (export "domos_dispatch") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
               (func (export "domos_release") (param i32))
               {extra}
               (@custom "domos:manifest" "{manifest}"))"#
        ))
        .unwrap()
    }

    #[test]
    fn a_name_is_registered_once_and_the_refusal_names_both_components() {
        let mut registry = ComponentRegistry::default();
        registry.add("svc-kv (embedded)", &module("name = \"svc-kv\"\nversion = \"1\"", "shared")).unwrap();
        let err = registry.add("my/kv.wasm", &module("name = \"svc-kv\"\nversion = \"2\"", "shared")).unwrap_err();
        assert_eq!(
            err,
            "component my/kv.wasm is called svc-kv, as is component svc-kv (embedded): a system holds one \
             component of each name (rename one in its manifest)"
        );
        assert_eq!(registry.get("svc-kv").unwrap().manifest.version, "1", "the first one stays");
        assert_eq!(registry.origin("svc-kv"), Some("svc-kv (embedded)"));
    }

    #[test]
    fn the_bounded_exports_of_both_builds_are_checked() {
        let manifest = "name = \"h\"\nversion = \"1\"\nbounded = [\"h\"]";
        let build = |memory: &str, body: &str| module_with(manifest, memory, &format!("(func (export \"h\") {body})"));
        let h = ComponentRegistry::default()
            .add_pair("h.wasm", &build("shared", "nop nop"), &build("", "nop nop nop"))
            .unwrap();
        assert_eq!(h.bounded, [("h".to_string(), 3)], "the larger of the two builds' bounds");
        let err = ComponentRegistry::default().add("h.wasm", &build("shared", "loop br 0 end")).unwrap_err();
        assert!(err.starts_with("component h.wasm: bounded export h: "), "{err}");
        let err = ComponentRegistry::default()
            .add_pair("h.wasm", &build("shared", "nop"), &build("", "loop br 0 end"))
            .unwrap_err();
        assert!(err.starts_with("component h.wasm: single-threaded build: bounded export h: "), "{err}");
    }

    #[test]
    fn the_two_builds_must_be_one_component() {
        let mut registry = ComponentRegistry::default();
        let threaded = module("name = \"a\"\nversion = \"1\"", "shared");
        let other = module("name = \"a\"\nversion = \"2\"", "");
        let err = registry.add_pair("a.wasm", &threaded, &other).unwrap_err();
        assert_eq!(
            err,
            "component a.wasm: the manifests of the two builds differ: version (1 in the threaded build, 2 in \
             the single-threaded one)"
        );
        let err = registry.add_pair("a.wasm", &threaded, &threaded).unwrap_err();
        assert!(err.starts_with("component a.wasm: single-threaded build: is a threaded build"), "{err}");
        assert!(registry.add_pair("a.wasm", &threaded, &module("name = \"a\"\nversion = \"1\"", "")).is_ok());
    }
}
