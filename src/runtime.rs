//! The async runtime the binding's Promise-returning functions run on.
//!
//! napi-rs' default tokio runtime allows 512 blocking threads; file-system work is
//! blocking, so we bound the pool to a small multiple of the machine's parallelism.

use napi_derive::module_init;

/// Blocking threads per available core: enough to overlap I/O waits, small enough that a
/// burst of calls cannot spawn hundreds of threads.
const BLOCKING_THREADS_PER_CORE: usize = 4;

#[module_init]
fn init() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores.clamp(1, 4))
        .max_blocking_threads((cores * BLOCKING_THREADS_PER_CORE).clamp(4, 64))
        .thread_name("paperclip-native")
        .enable_all()
        .build()
        .expect("failed to build the tokio runtime");
    napi::bindgen_prelude::create_custom_tokio_runtime(rt);
}
