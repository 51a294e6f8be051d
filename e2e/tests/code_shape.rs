//! The shape of Ladle's code: no source file over `MAX_FILE_LINES` lines and
//! no function over `MAX_FN_LINES` lines in the workspace's crates (issue
//! #18), so that new long files and functions cannot appear. The ones that
//! still exist are listed in `ALLOWED_LONG_FILES` and `ALLOWED_LONG_FNS`
//! with the issue that shortens them and their size today; the lists must
//! match what exists exactly, so an entry whose file or function grew,
//! shrank or went below the limit has to be updated or taken off (and the
//! lists only ever shrink).
//!
//! The files are those the crates' module declarations reach from each crate
//! root (`lib.rs`, `main.rs`, `src/bin/*.rs`), without `lobsters-bench` and
//! `e2e` (tools, not the database). Code under `#[cfg(test)]` or `#[test]`
//! does not count: a file's size is its lines less those of its test items
//! (an inline `mod tests` included), and test functions are not measured. A
//! function's size is the lines from its signature to its closing brace
//! (free functions, methods, trait methods with a body, and functions
//! nested in a body), measured with syn's spans.
//!
//! Run `cargo test -p ladle-e2e --test code_shape -- --nocapture` to print
//! every file and function over the limits.

mod source;

use std::collections::BTreeSet;
use std::path::Path;

use syn::spanned::Spanned;
use syn::visit::Visit;

use source::{
    crate_roots, is_cfg_test, item_attrs, mod_file, rel, workspace_members, workspace_root,
};

/// A source file's non-test lines may be at most this many.
const MAX_FILE_LINES: usize = 1_000;

/// A function's lines (signature to closing brace) may be at most this many.
const MAX_FN_LINES: usize = 150;

/// Workspace members that are not the database: their code is not measured.
const NOT_MEASURED: &[&str] = &["lobsters-bench", "e2e"];

/// Files over `MAX_FILE_LINES` today: (file, non-test lines, issue).
const ALLOWED_LONG_FILES: &[(&str, usize, &str)] = &[];

/// Functions over `MAX_FN_LINES` today: (file, `Type::method` or `function`,
/// lines, issue).
const ALLOWED_LONG_FNS: &[(&str, &str, usize, &str)] = &[];

#[test]
fn files_and_functions_stay_short() {
    let workspace = workspace_root();
    let mut files: BTreeSet<(String, usize)> = BTreeSet::new();
    let mut fns: BTreeSet<(String, String, usize)> = BTreeSet::new();
    for krate in workspace_members(&workspace) {
        if NOT_MEASURED.contains(&krate.as_str()) {
            continue;
        }
        for root in crate_roots(&workspace.join(&krate)) {
            let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
            measure_file(&workspace, &root, &dir, &mut |file, shape| {
                if shape.lines > MAX_FILE_LINES {
                    files.insert((file.to_string(), shape.lines));
                }
                for (name, lines) in shape.fns {
                    if lines > MAX_FN_LINES {
                        fns.insert((file.to_string(), name, lines));
                    }
                }
            });
        }
    }

    println!("files over {MAX_FILE_LINES} lines ({}):", files.len());
    for (file, lines) in &files {
        println!("    (\"{file}\", {lines}, \"#18\"),");
    }
    println!("functions over {MAX_FN_LINES} lines ({}):", fns.len());
    for (file, name, lines) in &fns {
        println!("    (\"{file}\", \"{name}\", {lines}, \"#18\"),");
    }

    let allowed_files: BTreeSet<(String, usize)> = ALLOWED_LONG_FILES
        .iter()
        .map(|(file, lines, _)| (file.to_string(), *lines))
        .collect();
    let allowed_fns: BTreeSet<(String, String, usize)> = ALLOWED_LONG_FNS
        .iter()
        .map(|(file, name, lines, _)| (file.to_string(), name.to_string(), *lines))
        .collect();
    let new_files: Vec<_> = files.difference(&allowed_files).collect();
    let new_fns: Vec<_> = fns.difference(&allowed_fns).collect();
    let gone_files: Vec<_> = allowed_files.difference(&files).collect();
    let gone_fns: Vec<_> = allowed_fns.difference(&fns).collect();
    assert!(
        new_files.is_empty() && new_fns.is_empty(),
        "files over {MAX_FILE_LINES} lines or functions over {MAX_FN_LINES} lines that are not \
         allowed at this size (split the file by concern into a module directory; extract the \
         function's phases into named functions): {new_files:#?} {new_fns:#?}"
    );
    assert!(
        gone_files.is_empty() && gone_fns.is_empty(),
        "these allowed long files or functions no longer exist at the size listed: take them \
         off ALLOWED_LONG_FILES / ALLOWED_LONG_FNS, or write their smaller size: \
         {gone_files:#?} {gone_fns:#?}"
    );
}

/// One file's non-test lines and its functions' (name, lines).
struct Shape {
    lines: usize,
    fns: Vec<(String, usize)>,
}

/// Measures `file` and, through its `mod x;` declarations (whose files live
/// in `dir`), every file it reaches, handing each to `report`.
fn measure_file(workspace: &Path, file: &Path, dir: &Path, report: &mut dyn FnMut(&str, Shape)) {
    let ast = source::parse(file);
    let total = std::fs::read_to_string(file)
        .map(|t| t.lines().count())
        .unwrap_or_default();
    let mut shape = Shape {
        lines: total - test_lines(&ast.items),
        fns: Vec::new(),
    };
    let mut visitor = FnLines {
        fns: &mut shape.fns,
        self_ty: None,
    };
    visitor.visit_file(&ast);
    report(&rel(workspace, file), shape);
    for_each_mod_file(&ast.items, dir, &mut |child, child_dir| {
        measure_file(workspace, child, child_dir, report)
    });
}

/// The files of the non-test `mod x;` declarations in `items` (and in their
/// inline non-test modules), with the directory each one's own `mod` files
/// live in.
fn for_each_mod_file(items: &[syn::Item], dir: &Path, f: &mut dyn FnMut(&Path, &Path)) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_cfg_test(&m.attrs) {
            continue;
        }
        let name = m.ident.to_string();
        match &m.content {
            Some((_, inner)) => for_each_mod_file(inner, &dir.join(&name), f),
            None => f(&mod_file(dir, m), &dir.join(&name)),
        }
    }
}

/// Lines taken by the test items (attributes included) of `items`,
/// including those inside inline non-test modules.
fn test_lines(items: &[syn::Item]) -> usize {
    items
        .iter()
        .map(|item| match item {
            _ if is_cfg_test(item_attrs(item)) => span_lines(item.span()),
            syn::Item::Mod(syn::ItemMod {
                content: Some((_, inner)),
                ..
            }) => test_lines(inner),
            _ => 0,
        })
        .sum()
}

fn span_lines(span: proc_macro2::Span) -> usize {
    span.end().line + 1 - span.start().line
}

/// Collects the functions of a file with their lines, skipping test code.
struct FnLines<'a> {
    fns: &'a mut Vec<(String, usize)>,
    /// The type of the `impl` block being visited.
    self_ty: Option<String>,
}

impl FnLines<'_> {
    fn record(&mut self, ident: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let lines = block.brace_token.span.close().end().line + 1 - sig.span().start().line;
        let name = match &self.self_ty {
            Some(ty) => format!("{ty}::{ident}"),
            None => ident.to_string(),
        };
        self.fns.push((name, lines));
    }
}

impl<'ast> Visit<'ast> for FnLines<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_cfg_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = match &*i.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        };
        let outer = std::mem::replace(&mut self.self_ty, ty);
        syn::visit::visit_item_impl(self, i);
        self.self_ty = outer;
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        let outer = self.self_ty.replace(t.ident.to_string());
        syn::visit::visit_item_trait(self, t);
        self.self_ty = outer;
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        // A function nested in a method body is not a method.
        let outer = self.self_ty.take();
        self.record(&f.sig.ident, &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
        self.self_ty = outer;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        self.record(&f.sig.ident, &f.sig, &f.block);
        let outer = self.self_ty.take();
        syn::visit::visit_impl_item_fn(self, f);
        self.self_ty = outer;
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if is_cfg_test(&f.attrs) {
            return;
        }
        if let Some(block) = &f.default {
            self.record(&f.sig.ident, &f.sig, block);
        }
        let outer = self.self_ty.take();
        syn::visit::visit_trait_item_fn(self, f);
        self.self_ty = outer;
    }
}
