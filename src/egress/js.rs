//! The proxy's events as JS hears them: the `onRequest` callback of a Sandbox, a machine or a
//! `NativeEgress`.

use std::sync::Arc;

use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use napi_derive::napi;

use super::{Event, EventSink};
use crate::output::QUEUE_DEPTH;

/// One request through the proxy (no header values, ever).
#[napi(object, object_from_js = false)]
pub struct EgressEvent {
    pub host: String,
    pub port: u32,
    pub method: String,
    /// The request target of a plain HTTP or terminated request; absent for a tunnel.
    pub path: Option<String>,
    pub allowed: bool,
    /// `tunnelled`, `terminated`, `forwarded`, or why it was refused or failed.
    pub reason: String,
    pub bytes: f64,
}

impl From<Event> for EgressEvent {
    fn from(e: Event) -> Self {
        EgressEvent {
            host: e.host,
            port: e.port as u32,
            method: e.method,
            path: e.path,
            allowed: e.allowed,
            reason: e.reason,
            bytes: e.bytes as f64,
        }
    }
}

/// The audit callback: weak (never keeps Node alive), bounded; events past the queue are dropped.
pub type EgressEventFn =
    ThreadsafeFunction<EgressEvent, (), EgressEvent, Status, false, true, QUEUE_DEPTH>;

/// The proxy's sink for a JS callback: each event is queued to JS without waiting.
pub fn event_sink(f: EgressEventFn) -> EventSink {
    let f = Arc::new(f);
    Arc::new(move |ev: Event| {
        f.call(
            EgressEvent::from(ev),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    })
}
