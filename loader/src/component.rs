//! Components: verified wasm modules with their manifests, and the registry a system loads
//! them from.
//!
//! A module holds one component, or several linked into one: the collocated build, whose
//! components share a domain's one heap and call each other as plain calls when the domain is
//! configured with `collocate = true` (decision 0015). Each component of such a module carries
//! its own manifest (`domos:manifest:NAME`) and entry points (`domos_init:NAME`, …).

use std::collections::BTreeMap;
use std::sync::Arc;

use domos_abi::{ENTRY_POINTS, EntryPoint, Grant, HostCall, component_export};

use crate::bounded;
use crate::codegen::Translator;
use crate::manifest::Manifest;
use crate::verifier::{self, HeapKind, Kind, ManifestSection, Verified};

/// The code of a verified module, shared by the components it holds.
pub struct Code {
    /// The host calls it imports.
    pub host_calls: Vec<String>,
    /// The waits of its threaded build's start function, which the kernel makes return when it
    /// terminates a domain running it.
    pub start_waits: Vec<verifier::StartWait>,
    /// The threaded build with its stack guard (`instrument::instrument`), ready to translate.
    bytes: Arc<[u8]>,
    /// The single-threaded build, for interpreted domains, likewise.
    single: Option<Arc<[u8]>>,
}

/// A loaded, verified component.
pub struct Component {
    /// What the component says about itself.
    pub manifest: Manifest,
    /// Whether it is an ordinary component or a scheduler.
    pub kind: Kind,
    /// The names under which its module exports its own entry points.
    pub entries: Entries,
    /// The exports the manifest lists as `bounded`, each with the most wasm instructions one
    /// call of it executes (the larger of the two builds' bounds), as `bounded::check` proved.
    pub bounded: Vec<(String, u64)>,
    /// The module it is in.
    pub code: Arc<Code>,
}

/// The export names of a component's entry points in its module: `domos_init`, or
/// `domos_init:NAME` where the module names them by component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entries {
    /// `domos_init`.
    pub init: String,
    /// `domos_main`, if the component has one.
    pub main: Option<String>,
    /// `domos_interrupt`'s name (exported or not: the kernel checks the manifest's `bounded`).
    pub interrupt: String,
    /// `domos_thread_entry`.
    pub thread_entry: String,
    /// `domos_dispatch`.
    pub dispatch: String,
    /// `domos_release`.
    pub release: String,
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Component({} {})", self.manifest.name, self.manifest.version)
    }
}

/// The components `verified` holds, with their bounded exports checked in `bytes`, over `code`.
fn components_in(verified: &Verified, bytes: &[u8], code: &Arc<Code>) -> Result<Vec<Component>, String> {
    let named = verified.manifests.iter().filter(|m| m.component.is_some()).count();
    if named != 0 && named != verified.manifests.len() {
        return Err(format!(
            "carries a {} section besides per-component ones ({}:NAME)",
            domos_abi::MANIFEST_SECTION,
            domos_abi::MANIFEST_SECTION
        ));
    }
    if verified.manifests.len() > 1 && verified.kind != Kind::Ordinary {
        return Err("is a scheduler and links several components; a scheduler is a module of its own".into());
    }
    let mut components = Vec::new();
    for ManifestSection { component, text } in &verified.manifests {
        let manifest = Manifest::parse(text).map_err(|e| match component {
            Some(name) => format!("bad manifest of {name}: {e}"),
            None => format!("bad manifest: {e}"),
        })?;
        if let Some(name) = component.as_deref().filter(|name| *name != manifest.name) {
            return Err(format!("its manifest section {name} holds the manifest of {}", manifest.name));
        }
        if components.iter().any(|c: &Component| c.manifest.name == manifest.name) {
            return Err(format!("carries two manifests of {}", manifest.name));
        }
        // A module of one component may name its entry points either way; one of several must
        // name them by component.
        let export = |entry: &str| {
            let own = component_export(entry, &manifest.name).to_string();
            if component.is_some() || verified.function_exports.contains(&own) { own } else { entry.to_string() }
        };
        if verified.kind == Kind::Ordinary
            && let Some(missing) = ENTRY_POINTS
                .iter()
                .map(|e| (e.required, export(e.name)))
                .find(|(required, name)| *required && !verified.function_exports.contains(name))
        {
            return Err(format!("does not export the entry point {}", missing.1));
        }
        let main = Some(export("domos_main")).filter(|main| verified.function_exports.contains(main));
        let bounded_exports: Vec<String> = manifest
            .bounded
            .iter()
            .map(|name| if EntryPoint::named(name).is_some() { export(name) } else { name.clone() })
            .collect();
        // `verify` validated the module already.
        let bounds = bounded::check_all_valid(bytes, &bounded_exports).map_err(|e| format!("bounded export {e}"))?;
        let bounded = manifest.bounded.iter().cloned().zip(bounds.into_iter().map(|(_, bound)| bound)).collect();
        components.push(Component {
            entries: Entries {
                init: export("domos_init"),
                main,
                interrupt: export("domos_interrupt"),
                thread_entry: export("domos_thread_entry"),
                dispatch: export("domos_dispatch"),
                release: export("domos_release"),
            },
            kind: verified.kind,
            bounded,
            code: code.clone(),
            manifest,
        });
    }
    Ok(components)
}

/// The component of a module that must hold one.
fn one_component(mut components: Vec<Component>) -> Result<Component, String> {
    match (components.pop(), components.len()) {
        (Some(component), 0) => Ok(component),
        (_, more) => Err(format!("links {} components; a component file holds one", more + 1)),
    }
}

/// Verifies a module as `heap` builds run it and instruments it; the verdict and the bytes to
/// translate.
fn verify_build(bytes: &[u8], heap: HeapKind) -> Result<(Verified, Arc<[u8]>), String> {
    let verified = verifier::verify(bytes, heap)?;
    Ok((verified, crate::instrument::instrument(bytes)?.into()))
}

/// Verifies a threaded build; the verdict and its code, ready to translate.
fn verify_threaded(bytes: &[u8]) -> Result<(Verified, Arc<Code>), String> {
    let (verified, instrumented) = verify_build(bytes, HeapKind::Shared)?;
    let code = Code {
        host_calls: verified.host_calls.iter().cloned().collect(),
        start_waits: verified.start_waits.clone(),
        bytes: instrumented,
        single: None,
    };
    Ok((verified, Arc::new(code)))
}

impl Component {
    /// Validates, verifies and reads the manifest of a wasm module of one component.
    ///
    /// # Errors
    /// Why the module is not an acceptable component.
    pub fn load(bytes: &[u8]) -> Result<Component, String> {
        let (verified, code) = verify_threaded(bytes)?;
        one_component(components_in(&verified, bytes, &code)?)
    }

    /// Adds the single-threaded build of the same component, which interpreted domains run.
    ///
    /// # Errors
    /// When it fails verification, or its manifest, entry points or host calls differ.
    pub fn with_single_build(mut self, bytes: &[u8]) -> Result<Component, String> {
        let (verified, instrumented) =
            verify_build(bytes, HeapKind::Single).map_err(|e| format!("single-threaded build: {e}"))?;
        let code =
            Arc::new(Code { host_calls: Vec::new(), start_waits: Vec::new(), bytes: Arc::from([]), single: None });
        let other = components_in(&verified, bytes, &code)
            .and_then(one_component)
            .map_err(|e| format!("single-threaded build: {e}"))?;
        let differences: Vec<String> = self
            .manifest
            .differences(&other.manifest)
            .into_iter()
            .map(|(key, threaded, single)| {
                format!("{key} ({threaded} in the threaded build, {single} in the single-threaded one)")
            })
            .collect();
        if !differences.is_empty() {
            return Err(format!("the manifests of the two builds differ: {}", differences.join("; ")));
        }
        if other.entries != self.entries || other.kind != self.kind {
            return Err("the single-threaded build has other entry points than the threaded build".into());
        }
        if let Some(extra) = verified.host_calls.iter().find(|c| !self.code.host_calls.contains(c)) {
            return Err(format!("the single-threaded build imports {extra}, which the threaded build does not"));
        }
        for ((_, bound), (_, single)) in self.bounded.iter_mut().zip(other.bounded) {
            *bound = (*bound).max(single);
        }
        // Loaded by `load` just now, the code is this component's alone.
        Arc::get_mut(&mut self.code).ok_or("the code is shared")?.single = Some(instrumented);
        Ok(self)
    }

    /// Whether the component has a `main` entry point.
    pub fn has_main(&self) -> bool {
        self.entries.main.is_some()
    }

    /// The host calls its module imports.
    pub fn host_calls(&self) -> &[String] {
        &self.code.host_calls
    }

    /// Whether an interpreted domain can run this component.
    pub fn has_single_build(&self) -> bool {
        self.code.single.is_some()
    }

    /// The bytes to translate for `translator`: the threaded build of its module for
    /// Cranelift, the single-threaded one for Pulley, each with its stack guard.
    ///
    /// # Errors
    /// When there is no single-threaded build and Pulley is asked for.
    pub fn code_for(&self, translator: Translator) -> Result<&[u8], String> {
        match translator {
            Translator::Cranelift => Ok(&self.code.bytes),
            Translator::Pulley => self.code.single.as_deref().ok_or_else(|| {
                format!(
                    "component {} has no single-threaded build, which the pulley translator needs",
                    self.manifest.name
                )
            }),
        }
    }

    /// The host calls this component imports that `grants` do not cover.
    pub fn ungranted_calls(&self, grants: &[Grant]) -> Vec<&str> {
        self.code
            .host_calls
            .iter()
            .filter(|call| HostCall::named(call).is_some_and(|c| c.grant != Grant::Basic && !grants.contains(&c.grant)))
            .map(String::as_str)
            .collect()
    }
}

/// The collocated build: one module linking components the registry holds on their own too,
/// for the domains configured with `collocate = true`. Verified when a domain first needs it:
/// it is as large as all its components together.
struct Collocated {
    origin: String,
    bytes: Arc<[u8]>,
    loaded: std::sync::OnceLock<Result<BTreeMap<String, Arc<Component>>, String>>,
}

/// The components a system can use, by name, each with where it came from.
#[derive(Default, Clone)]
pub struct ComponentRegistry {
    components: BTreeMap<String, (String, Arc<Component>)>,
    collocated: Option<Arc<Collocated>>,
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

    /// Offers `bytes` as the collocated build: a module linking several components, of which
    /// those the registry holds on their own are offered collocated (each must say the same of
    /// itself in both). It is verified when [`ComponentRegistry::collocated`] is first asked.
    pub fn add_collocated(&mut self, origin: &str, bytes: &[u8]) {
        let loaded = std::sync::OnceLock::new();
        self.collocated = Some(Arc::new(Collocated { origin: origin.to_string(), bytes: bytes.into(), loaded }));
    }

    /// The component called `name` in the collocated build, where it shares its module with the
    /// others there; `None` when the build does not link it (or there is none).
    ///
    /// # Errors
    /// Why the collocated build was refused, naming where it came from.
    pub fn collocated(&self, name: &str) -> Result<Option<&Arc<Component>>, String> {
        let Some(collocated) = &self.collocated else { return Ok(None) };
        let components = collocated.loaded.get_or_init(|| self.load_collocated(&collocated.bytes));
        match components {
            Ok(components) => Ok(components.get(name)),
            Err(e) => Err(format!("collocated build {}: {e}", collocated.origin)),
        }
    }

    /// [`ComponentRegistry::collocated`] for a domain that must run `name` collocated.
    ///
    /// # Errors
    /// Why the collocated build was refused, or that it does not link `name`.
    pub fn collocated_for(&self, name: &str) -> Result<&Arc<Component>, String> {
        self.collocated(name)?.ok_or_else(|| {
            format!(
                "component {name} is not in the collocated build, which links the components built into domos \
                 from components/ (collocate = false runs it on its own)"
            )
        })
    }

    fn load_collocated(&self, bytes: &[u8]) -> Result<BTreeMap<String, Arc<Component>>, String> {
        let (verified, code) = verify_threaded(bytes)?;
        let mut components = BTreeMap::new();
        for component in components_in(&verified, bytes, &code)? {
            let name = component.manifest.name.clone();
            // A system collocates only components it holds on its own too.
            let Some(alone) = self.get(&name) else { continue };
            if let Some((key, _, _)) = alone.manifest.differences(&component.manifest).first() {
                return Err(format!("its {name} differs from the one on its own in `{key}`"));
            }
            components.insert(name, Arc::new(component));
        }
        Ok(components)
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

    /// A module linking the components `names`, each with its own entry points and a
    /// `domos:manifest:NAME` section holding `manifest(name)`.
    fn linked(names: &[&str], manifest: impl Fn(&str) -> String) -> Vec<u8> {
        wat::parse_str(linked_text(names, manifest)).unwrap()
    }

    fn linked_text(names: &[&str], manifest: impl Fn(&str) -> String) -> String {
        let mut body = String::new();
        for name in names {
            let text = manifest(name).replace('"', "\\\"").replace('\n', "\\n");
            body += &format!(
                r#"(func (export "domos_init:{name}") (result i32) i32.const 0)
                   (func (export "domos_thread_entry:{name}") (param i32) (result i32) i32.const 0)
                   (func (export "domos_dispatch:{name}") (param i32 i32 i32 i32 i32) (result i32) i32.const 0)
                   (func (export "domos_release:{name}") (param i32))
                   (@custom "domos:manifest:{name}" "{text}")"#
            );
        }
        format!(
            r#"(module (import "env" "memory" (memory 1 65536 shared))
               (global (export "__stack_pointer") (mut i32) (i32.const 65536))
               (func (export "domos_main:a") (result i32) i32.const 0)
               {body})"#
        )
    }

    #[test]
    fn a_collocated_build_offers_the_components_the_registry_holds_alone() {
        let manifest = |name: &str| format!("name = \"{name}\"\nversion = \"1\"");
        let mut registry = ComponentRegistry::default();
        registry.add("a", &module(&manifest("a"), "shared")).unwrap();
        registry.add("b", &module(&manifest("b"), "shared")).unwrap();
        registry.add_collocated("ab", &linked(&["a", "b", "c"], manifest));
        let a = registry.collocated("a").unwrap().unwrap();
        let b = registry.collocated("b").unwrap().unwrap();
        assert!(Arc::ptr_eq(&a.code, &b.code), "one module");
        assert_eq!(a.entries.init, "domos_init:a");
        assert_eq!(a.entries.main.as_deref(), Some("domos_main:a"));
        assert_eq!((b.entries.main.as_ref(), b.entries.dispatch.as_str()), (None, "domos_dispatch:b"));
        assert!(registry.collocated("c").unwrap().is_none(), "c is not held on its own");
        let alone = registry.get("a").unwrap();
        assert_eq!((alone.entries.init.as_str(), alone.has_main()), ("domos_init", false));

        // A component file holds one component.
        let err = Component::load(&linked(&["a", "b"], manifest)).unwrap_err();
        assert_eq!(err, "links 2 components; a component file holds one");
        // What a component says of itself is the same in the collocated build.
        registry.add_collocated("ab", &linked(&["a"], |name| format!("{}\ndescription = \"other\"", manifest(name))));
        let err = registry.collocated("a").unwrap_err();
        assert_eq!(err, "collocated build ab: its a differs from the one on its own in `description`");
        // A section named for one component holds its manifest, and each component has its own
        // entry points.
        registry.add_collocated("ab", &linked(&["a"], |_| manifest("b")));
        let err = registry.collocated("a").unwrap_err();
        assert_eq!(err, "collocated build ab: its manifest section a holds the manifest of b");
        let no_release = linked_text(&["a"], manifest).replace("domos_release:a", "domos_release:z");
        let err = Component::load(&wat::parse_str(no_release).unwrap()).unwrap_err();
        assert_eq!(err, "does not export the entry point domos_release:a");
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
