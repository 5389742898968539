//! Embeds the single-file viewer in the `memlens` binary, so `memlens html` and `memlens serve`
//! need nothing beside the binary. The file is `dist-single/memlens.html` at the workspace root
//! (or `$MEMLENS_VIEWER_HTML`), made by `bash scripts/serve.sh --build` (trunk build, then
//! scripts/single_file.py). Without it the binary still builds, and those two commands say how
//! to build the viewer. Writes `$OUT_DIR/viewer.rs`: `VIEWER_HTML: Option<&str>`.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MEMLENS_VIEWER_HTML");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let path = match std::env::var_os("MEMLENS_VIEWER_HTML") {
        Some(p) => PathBuf::from(p),
        None => manifest.join("../../dist-single/memlens.html"),
    };
    // Watch the folder (it always exists: it holds a tracked .gitignore), so a viewer built
    // later is picked up; a missing path would make cargo rerun this script on every build.
    match path.parent().filter(|d| d.is_dir()) {
        Some(dir) => println!("cargo:rerun-if-changed={}", dir.display()),
        None => println!("cargo:rerun-if-changed={}", path.display()),
    }
    let code = match std::fs::read(&path) {
        Ok(html) => {
            let copy = out_dir.join("memlens.html");
            if let Err(e) = std::fs::write(&copy, html) {
                panic!("cannot write {}: {e}", copy.display());
            }
            "pub const VIEWER_HTML: Option<&str> = Some(include_str!(concat!(env!(\"OUT_DIR\"), \"/memlens.html\")));\n"
        }
        Err(_) => "pub const VIEWER_HTML: Option<&str> = None;\n",
    };
    let rs = out_dir.join("viewer.rs");
    if let Err(e) = std::fs::write(&rs, code) {
        panic!("cannot write {}: {e}", rs.display());
    }
}
