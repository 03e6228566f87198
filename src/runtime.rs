//! The async runtime the binding's Promise-returning functions run on, and the dedicated
//! threads for calls that must not hold one of its threads.
//!
//! napi-rs' default tokio runtime allows 512 blocking threads; file-system work is
//! blocking, so we bound the pool to a small multiple of the machine's parallelism.

use napi_derive::module_init;
use paperclip_sync_core::error::{codes, Error as CoreError};
use paperclip_sync_core::worker::Worker;

use crate::error::to_napi;

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

/// Runs blocking core work on a new thread of its own (named `name`), for work that waits
/// on the network for as long as the peer likes: it never holds one of the bounded pool's
/// threads, nor a libuv thread. Resolves with the work's result.
pub async fn run_dedicated<T, F>(name: &str, work: F) -> napi::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CoreError> + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let worker = Worker::spawn(name, move |_| {
        let _ = tx.send(work());
        Ok(())
    })
    .map_err(to_napi)?;
    // The result comes through the channel; a thread that panicked drops its sender.
    worker.detach();
    match rx.await {
        Ok(result) => result.map_err(to_napi),
        Err(_) => Err(to_napi(CoreError::new(codes::INTERNAL, format!("the {name} thread ended without a result")))),
    }
}
