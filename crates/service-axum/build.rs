//! `include_dir!` does not tell cargo which files it read: rebuild when anything in
//! the console's directory changes.
fn main() {
    println!("cargo:rerun-if-changed=../../console");
}
