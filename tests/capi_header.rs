//! The C header declares what the documentation names (tests/generated_sources.rs checks it
//! is fresh); the C API's raw pointers are handled in src/capi/raw.rs only.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn the_header_declares_the_documented_names() {
    let header = std::fs::read_to_string(Path::new(ROOT).join("include/circulant.h"))
        .expect("include/circulant.h");
    for name in [
        "int circulant_init(circulant_comm **comm)",
        "int circulant_init_oob(circulant_comm **comm,",
        "typedef int (*circulant_oob_allgather_fn)(const void *send, void *recv, size_t bytes, void *ctx)",
        "int circulant_bcast(const circulant_comm *comm, void *buf, size_t bytes, int root)",
        "int circulant_allgatherv(const circulant_comm *comm,",
        "int circulant_iallreduce(",
        "int circulant_test(circulant_request *request, int *done)",
        "int circulant_wait(circulant_request *request)",
        "int circulant_start(circulant_request *request)",
        "const char *circulant_strerror(int code)",
        "#define CIRCULANT_IN_PLACE",
        "#define CIRCULANT_SUCCESS 0",
        "#define CIRCULANT_FLOAT64 5",
        "#define CIRCULANT_BXOR 6",
    ] {
        assert!(header.contains(name), "the header lacks `{name}`");
    }
}

#[test]
fn unsafe_code_of_the_c_api_is_only_in_raw() {
    let dir = Path::new(ROOT).join("src/capi");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/capi") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n == "raw.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            // Blocks, functions, impls and traits; not the lint name, nor `unsafe extern "C"
            // fn(...)` as the type of the caller's callback, which runs nothing.
            let kinds = ["unsafe {", "unsafe fn", "unsafe impl", "unsafe trait"];
            if kinds.iter().any(|k| code.contains(k)) {
                offenders.push(format!("{}:{}: {line}", path.display(), i + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "unsafe outside src/capi/raw.rs:\n{}",
        offenders.join("\n")
    );
}
