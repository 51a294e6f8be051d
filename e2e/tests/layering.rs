//! The module layering of every workspace crate: builds each crate's module
//! import graph from its source and fails on an import circle between
//! modules, so that new circles cannot appear. The circles that still exist
//! are listed in `ALLOWED_CIRCLES` with the issue that removes them; the list
//! must match today's circles exactly, so a circle that is broken has to be
//! taken off it (and the list only ever shrinks).
//!
//! The graph's nodes are source files (an inline `mod` belongs to its file).
//! An edge `a -> b` means code in `a` names an item *defined* in `b`: paths
//! are resolved through `use` aliases, re-exports and glob imports to the
//! module that defines the item, so a crate root's `pub use` does not by
//! itself make the root depend on anything. Code under `#[cfg(test)]` is left
//! out: a test module may reach anywhere.
//!
//! Run `cargo test -p ladle-e2e --test layering -- --nocapture` to print the
//! circles and the modules that import items defined in a crate root.

mod source;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use source::{
    crate_roots, is_cfg_test, item_attrs, mod_file, rel, workspace_members, workspace_root,
};

/// Circles that exist today, each with the issue that removes it and why it
/// exists. Files are relative to the workspace root; each entry is one
/// strongly connected component of the import graph.
const ALLOWED_CIRCLES: &[(&str, &[&str])] = &[];

/// Crates whose root still defines items that other modules of the crate
/// import (the root doubling as the bottom layer), with the issue that
/// reduces the root to docs, modules and re-exports.
const ALLOWED_ROOT_IMPORTS: &[(&str, &str)] = &[];

#[test]
fn no_new_import_circles() {
    let workspace = workspace_root();
    let mut found: BTreeSet<Vec<String>> = BTreeSet::new();
    let mut root_importers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for krate in workspace_members(&workspace) {
        for root in crate_roots(&workspace.join(&krate)) {
            let tree = ModuleTree::load(&workspace, &root);
            let graph = tree.file_graph();
            for circle in circles(&graph) {
                println!("circle {}:", circle.join(" <-> "));
                for from in &circle {
                    for (to, paths) in &graph[from] {
                        if circle.contains(to) {
                            let paths: Vec<_> = paths.iter().cloned().collect();
                            println!("    {from} -> {to}: {}", paths.join(", "));
                        }
                    }
                }
                found.insert(circle);
            }
            let root_file = rel(&workspace, &root);
            for (from, to) in &graph {
                if to.contains_key(&root_file) && from != &root_file {
                    root_importers
                        .entry(root_file.clone())
                        .or_default()
                        .insert(from.clone());
                }
            }
        }
    }

    println!("import circles ({}):", found.len());
    for circle in &found {
        println!("  {}", circle.join(" <-> "));
    }
    println!("modules importing items defined in a crate root:");
    for (root, importers) in &root_importers {
        println!(
            "  {root}: {}",
            importers.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }

    let allowed: BTreeSet<Vec<String>> = ALLOWED_CIRCLES
        .iter()
        .map(|(_, files)| {
            let mut files: Vec<String> = files.iter().map(|f| f.to_string()).collect();
            files.sort();
            files
        })
        .collect();
    let new: Vec<_> = found.difference(&allowed).collect();
    let gone: Vec<_> = allowed.difference(&found).collect();
    assert!(
        new.is_empty(),
        "new import circles between modules (break them by moving the shared type to the module \
         that owns it, or to a lower module both can import): {new:#?}"
    );
    assert!(
        gone.is_empty(),
        "these allowed circles no longer exist as listed: take them off ALLOWED_CIRCLES \
         (or list the smaller circle that remains): {gone:#?}"
    );

    let allowed_roots: BTreeSet<&str> =
        ALLOWED_ROOT_IMPORTS.iter().map(|(root, _)| *root).collect();
    let upward: Vec<_> = root_importers
        .iter()
        .filter(|(root, _)| !allowed_roots.contains(root.as_str()))
        .collect();
    assert!(
        upward.is_empty(),
        "modules import items defined in their crate root; define those items in a module of \
         their own and re-export them from the root: {upward:#?}"
    );
    let clean: Vec<_> = allowed_roots
        .iter()
        .filter(|root| !root_importers.contains_key(**root))
        .collect();
    assert!(
        clean.is_empty(),
        "take these crate roots off ALLOWED_ROOT_IMPORTS: {clean:?}"
    );
}

/// The strongly connected components with more than one file, each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let mut g: DiGraph<String, ()> = DiGraph::new();
    let mut index: HashMap<String, NodeIndex> = HashMap::new();
    let mut node = |g: &mut DiGraph<String, ()>, name: &String| {
        *index
            .entry(name.clone())
            .or_insert_with(|| g.add_node(name.clone()))
    };
    for (from, tos) in graph {
        let a = node(&mut g, from);
        for to in tos.keys() {
            let b = node(&mut g, to);
            g.add_edge(a, b, ());
        }
    }
    tarjan_scc(&g)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut files: Vec<String> = scc.iter().map(|n| g[*n].clone()).collect();
            files.sort();
            files
        })
        .collect()
}

type ModId = usize;

/// file -> files it imports from -> the paths that name them.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// One `use` leaf: `name` is the alias it binds (`None` for a glob), `path`
/// the path as written, resolved from the module that holds it.
struct UseLeaf {
    name: Option<String>,
    path: Vec<String>,
    public: bool,
}

#[derive(Default)]
struct Module {
    /// The file the module's code is in (relative to the workspace).
    file: String,
    parent: Option<ModId>,
    children: HashMap<String, ModId>,
    /// Names of the items defined here (types, functions, traits, consts...).
    items: BTreeSet<String>,
    uses: Vec<UseLeaf>,
    /// Multi-segment paths named in code (types, calls, macro bodies).
    paths: Vec<Vec<String>>,
}

/// What a path resolves to.
enum Target {
    /// A module (the path names a module, not an item in it).
    Module(ModId),
    /// An item defined in the module.
    Item(ModId),
}

struct ModuleTree {
    modules: Vec<Module>,
}

impl ModuleTree {
    fn load(workspace: &Path, root: &Path) -> ModuleTree {
        let mut tree = ModuleTree {
            modules: Vec::new(),
        };
        let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        tree.load_file(workspace, root, dir, None);
        tree
    }

    /// Parses `file` as a module; `dir` is where its `mod x;` files live.
    fn load_file(
        &mut self,
        workspace: &Path,
        file: &Path,
        dir: PathBuf,
        parent: Option<ModId>,
    ) -> ModId {
        let ast = source::parse(file);
        let id = self.new_module(rel(workspace, file), parent);
        self.load_items(workspace, &ast.items, id, &dir);
        id
    }

    fn new_module(&mut self, file: String, parent: Option<ModId>) -> ModId {
        self.modules.push(Module {
            file,
            parent,
            ..Module::default()
        });
        self.modules.len() - 1
    }

    fn load_items(&mut self, workspace: &Path, items: &[syn::Item], id: ModId, dir: &Path) {
        for item in items {
            if is_cfg_test(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let child = match &m.content {
                        Some((_, inner)) => {
                            let file = self.modules[id].file.clone();
                            let child = self.new_module(file, Some(id));
                            self.load_items(workspace, inner, child, &dir.join(&name));
                            child
                        }
                        None => {
                            let file = mod_file(dir, m);
                            self.load_file(workspace, &file, dir.join(&name), Some(id))
                        }
                    };
                    self.modules[id].children.insert(name, child);
                }
                syn::Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for (name, path) in leaves {
                        self.modules[id].uses.push(UseLeaf { name, path, public });
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        self.modules[id].items.insert(name);
                    }
                    let mut collector = PathCollector::default();
                    collector.visit_item(other);
                    self.modules[id].paths.extend(collector.paths);
                    for (name, path) in collector.local_uses {
                        self.modules[id].uses.push(UseLeaf {
                            name,
                            path,
                            public: false,
                        });
                    }
                }
            }
        }
    }

    /// File-level edges: file -> file defining an item it names -> the
    /// paths naming it (as written).
    fn file_graph(&self) -> Graph {
        let mut graph = Graph::new();
        for (id, module) in self.modules.iter().enumerate() {
            let mut targets = Vec::new();
            for leaf in &module.uses {
                if leaf.public {
                    continue; // a re-export passes through; its users resolve through it
                }
                match self.resolve(id, &leaf.path, 0) {
                    Some(Target::Item(t)) => targets.push((t, &leaf.path)),
                    Some(Target::Module(t)) if leaf.name.is_none() => targets.push((t, &leaf.path)),
                    _ => {}
                }
            }
            for path in &module.paths {
                if let Some(Target::Item(t)) = self.resolve(id, path, 0) {
                    targets.push((t, path));
                }
            }
            let entry = graph.entry(module.file.clone()).or_default();
            for (t, path) in targets {
                if self.modules[t].file != module.file {
                    entry
                        .entry(self.modules[t].file.clone())
                        .or_default()
                        .insert(path.join("::"));
                }
            }
        }
        graph
    }

    /// Resolves `path` as written in module `from`; `None` for paths outside
    /// the crate (other crates, std, locals).
    fn resolve(&self, from: ModId, path: &[String], depth: usize) -> Option<Target> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let first = path[0].as_str();
        let (mut cur, mut rest) = match first {
            "crate" => (0, &path[1..]),
            "self" => (from, &path[1..]),
            "super" => {
                let mut cur = from;
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    cur = self.modules[cur].parent?;
                    rest = &rest[1..];
                }
                (cur, rest)
            }
            _ => {
                if let Some(&child) = self.modules[from].children.get(first) {
                    (child, &path[1..])
                } else {
                    let leaf = self.modules[from]
                        .uses
                        .iter()
                        .find(|u| u.name.as_deref() == Some(first))?;
                    let mut full = leaf.path.clone();
                    full.extend_from_slice(&path[1..]);
                    return self.resolve(from, &full, depth + 1);
                }
            }
        };
        while let Some(name) = rest.first() {
            if let Some(&child) = self.modules[cur].children.get(name.as_str()) {
                cur = child;
                rest = &rest[1..];
            } else {
                return Some(Target::Item(
                    self.item_home(cur, name, depth).unwrap_or(cur),
                ));
            }
        }
        Some(Target::Module(cur))
    }

    /// The module that defines `name` as seen from module `m` (following
    /// its imports and re-exports).
    fn item_home(&self, m: ModId, name: &str, depth: usize) -> Option<ModId> {
        if depth > 16 {
            return None;
        }
        let module = &self.modules[m];
        if module.items.contains(name) {
            return Some(m);
        }
        if let Some(leaf) = module.uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            return match self.resolve(m, &leaf.path, depth + 1)? {
                Target::Item(t) | Target::Module(t) => Some(t),
            };
        }
        module
            .uses
            .iter()
            .filter(|u| u.name.is_none())
            .find_map(|glob| match self.resolve(m, &glob.path, depth + 1)? {
                Target::Module(g) if g != m => self.item_home(g, name, depth + 1),
                _ => None,
            })
    }
}

/// Flattens a use tree into (bound name, path) leaves; a glob binds no name.
fn use_leaves(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((Some(last.clone()), prefix.clone()));
                }
            } else {
                let mut path = prefix.clone();
                path.push(name.clone());
                out.push((Some(name), path));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((Some(r.rename.to_string()), path));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Collects the multi-segment paths an item names, including inside macro
/// invocations, and the `use` declarations inside function bodies; skips
/// `#[cfg(test)]` code.
#[derive(Default)]
struct PathCollector {
    paths: Vec<Vec<String>>,
    local_uses: Vec<(Option<String>, Vec<String>)>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 && path.leading_colon.is_none() {
            self.paths
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        macro_paths(mac.tokens.clone(), &mut self.paths);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        use_leaves(&u.tree, &mut Vec::new(), &mut self.local_uses);
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_cfg_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

/// Paths like `a::b::c` inside a macro's tokens (which syn leaves unparsed).
fn macro_paths(tokens: TokenStream, out: &mut Vec<Vec<String>>) {
    let mut current: Vec<String> = Vec::new();
    let mut colons = 0;
    let flush = |current: &mut Vec<String>, out: &mut Vec<Vec<String>>| {
        if current.len() > 1 {
            out.push(std::mem::take(current));
        }
        current.clear();
    };
    for token in tokens {
        match token {
            TokenTree::Ident(ident) => {
                if colons != 2 {
                    flush(&mut current, out);
                }
                current.push(ident.to_string());
                colons = 0;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && !current.is_empty() => colons += 1,
            TokenTree::Group(g) => {
                flush(&mut current, out);
                colons = 0;
                macro_paths(g.stream(), out);
            }
            _ => {
                flush(&mut current, out);
                colons = 0;
            }
        }
    }
    flush(&mut current, out);
}
