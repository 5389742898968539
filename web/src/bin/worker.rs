//! Worker entry point: Trunk's loader shim runs this inside a Web Worker.

fn main() {
    memlens_web::worker::start();
}
