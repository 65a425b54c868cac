//! tch sets no rpath on the final binaries: without one they load a wrong libtorch or none.
//! Point the rpath at the libtorch the build used (LIBTORCH, resolved through symlinks).

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(dir) = std::env::var("LIBTORCH") {
        let lib = std::path::Path::new(&dir).join("lib");
        let lib = std::fs::canonicalize(&lib).unwrap_or(lib);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}
