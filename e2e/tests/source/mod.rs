//! The workspace's crates as source: their members, crate roots and the
//! files their module declarations reach, shared by the tests that read
//! Ladle's own code (`layering`, `code_shape`).

use std::fs;
use std::path::{Path, PathBuf};

pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// The `members` of the workspace `Cargo.toml`.
pub fn workspace_members(workspace: &Path) -> Vec<String> {
    let manifest = fs::read_to_string(workspace.join("Cargo.toml")).unwrap_or_default();
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .unwrap_or_default();
    let members: Vec<String> = members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(
        !members.is_empty(),
        "no workspace members found in Cargo.toml"
    );
    members
}

/// `src/lib.rs`, `src/main.rs` and `src/bin/*.rs`: each is a crate of its own.
pub fn crate_roots(dir: &Path) -> Vec<PathBuf> {
    let src = dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(entries) = fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
}

/// The file of `mod name;` declared by a module whose `mod` files live in
/// `dir`: its `#[path = "..."]` (relative to `dir`; a crate root's or
/// `mod.rs`'s, as the compiler reads it there), else `dir/name.rs`, else
/// `dir/name/mod.rs`.
pub fn mod_file(dir: &Path, m: &syn::ItemMod) -> PathBuf {
    let path = m.attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    });
    if let Some(path) = path {
        return dir.join(path);
    }
    let name = m.ident.to_string();
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(&name).join("mod.rs")
    }
}

/// Reads and parses one source file.
pub fn parse(file: &Path) -> syn::File {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("parse {}: {e}", file.display()))
}

/// `file` relative to the workspace root.
pub fn rel(workspace: &Path, file: &Path) -> String {
    file.strip_prefix(workspace)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// `#[test]` or `#[cfg(test)]`.
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.meta
                    .require_list()
                    .is_ok_and(|l| l.tokens.to_string() == "test"))
    })
}

pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}
