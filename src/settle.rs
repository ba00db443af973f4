//! How an async method's promise settles: the results of all calls of a napi env reach its JS
//! thread through one threadsafe function made once, where napi-rs' `spawn_future` makes and tears
//! down a threadsafe function (a libuv handle, an async resource, an env cleanup hook) and runs a
//! second tokio task per call. Results that arrive together settle in one wake of the JS thread.
//!
//! The function keeps Node's event loop alive while calls of its env are pending, as each call's
//! own function did, and not otherwise: a script whose calls are done exits by itself.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

/// Makes a call's JS value, on the JS thread.
pub type Convert = Box<dyn FnOnce(sys::napi_env) -> napi::Result<sys::napi_value> + Send>;

/// `value`'s [`Convert`]: its JS value, made when the call settles.
pub fn convert<T: ToNapiValue + Send + 'static>(value: T) -> Convert {
    Box::new(move |env| {
        // SAFETY: `call_js` calls this on the JS thread, with its env, where napi would call T's
        // conversion itself.
        unsafe { T::to_napi_value(env, value) }
    })
}

/// What a call sends to the JS thread.
struct Settle {
    deferred: sys::napi_deferred,
    outcome: napi::Result<Convert>,
}

/// An env's threadsafe function; `None` from the moment its env starts going away.
struct Channel(Mutex<Option<Tsfn>>);

struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: a napi threadsafe function is made to be called from any thread; calls go through the
// channel's lock, which the env's cleanup hook also takes before it releases the function.
unsafe impl Send for Tsfn {}

/// The JS thread's side of its env's channel, and how many of its calls are pending.
struct Local {
    env: sys::napi_env,
    channel: Arc<Channel>,
    pending: Cell<usize>,
}

thread_local! {
    // A napi env lives on one thread and a thread has one env at a time (the main thread, or a
    // worker's); the env is kept to tell a later one on the same thread apart.
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(format!(
            "{what} failed (napi status {status})"
        )))
    }
}

/// A call's work, boxed: one future type, so tokio's task machinery is built once.
pub type Work = Pin<Box<dyn Future<Output = napi::Result<Convert>> + Send>>;

/// Starts `fut` on tokio and returns the promise its outcome settles.
pub fn spawn(env: &napi::Env, fut: Work) -> napi::Result<sys::napi_value> {
    let (promise, pending) = promise(env)?;
    napi::bindgen_prelude::spawn(crate::task::dropping_later(async move {
        let outcome = fut.await;
        pending.settle(outcome);
    }));
    Ok(promise)
}

/// A promise, and what settles it from any thread ([`Settler::settle`]): for work that is not one
/// future of its own (a kernel's cells, settled by the kernel's serving task).
pub fn promise(env: &napi::Env) -> napi::Result<(sys::napi_value, Settler)> {
    // An Env is only ever at hand on its JS thread, which every napi call below needs.
    let env = env.raw();
    let channel = channel(env)?;
    let mut deferred = ptr::null_mut();
    let mut promise = ptr::null_mut();
    // SAFETY: on the JS thread with its env.
    let created = unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) };
    check(created, "creating a promise")?;
    began(env);
    let pending = Pending {
        deferred,
        channel: Some(channel),
    };
    Ok((promise, Settler(pending)))
}

/// Settles one promise of [`promise`], once, from any thread; dropped unsettled, it rejects. A
/// settling on the JS thread itself (a kernel's reply within its submit) is delivered a turn of
/// the loop later, as any other.
pub struct Settler(Pending);

impl Settler {
    pub fn settle(self, outcome: napi::Result<Convert>) {
        self.0.settle(outcome);
    }
}

/// A promise not settled yet. Dropped unsettled (its task dropped at runtime shutdown) it rejects,
/// so no call's promise stays pending, holding the loop, for ever.
struct Pending {
    deferred: sys::napi_deferred,
    channel: Option<Arc<Channel>>,
}

// SAFETY: the deferred is only carried by this thread; it is used on the JS thread (`call_js`).
unsafe impl Send for Pending {}

impl Pending {
    fn settle(mut self, outcome: napi::Result<Convert>) {
        if let Some(channel) = self.channel.take() {
            send(&channel, self.deferred, outcome);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(channel) = self.channel.take() {
            let why = napi::Error::from_reason("the call ended without a result");
            send(&channel, self.deferred, Err(why));
        }
    }
}

fn send(channel: &Channel, deferred: sys::napi_deferred, outcome: napi::Result<Convert>) {
    let job = Box::into_raw(Box::new(Settle { deferred, outcome }));
    let tsfn = channel.0.lock().unwrap_or_else(|p| p.into_inner());
    let queued = tsfn.as_ref().is_some_and(|t| {
        // SAFETY: the function is live while it is in the channel (the cleanup hook takes it out,
        // under this lock, before releasing it); a queued job is owned by `call_js` from here on.
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                t.0,
                job.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        status == sys::Status::napi_ok
    });
    drop(tsfn);
    if !queued {
        // The env is going away: there is no promise left to settle.
        // SAFETY: not queued, so still ours.
        drop(unsafe { Box::from_raw(job) });
    }
}

/// A call of this thread's env began: its result is now awaited, so the loop stays alive.
fn began(env: sys::napi_env) {
    count(env, true);
}

/// A call of this thread's env settled; with none pending the loop may end.
fn ended(env: sys::napi_env) {
    count(env, false);
}

/// Counts `env`'s pending calls; the function holds the loop exactly while there are some.
fn count(env: sys::napi_env, up: bool) {
    LOCAL.with_borrow(|l| {
        let Some(l) = l.as_ref().filter(|l| l.env == env) else {
            return;
        };
        let before = l.pending.get();
        let now = if up {
            before + 1
        } else {
            before.saturating_sub(1)
        };
        l.pending.set(now);
        if (before == 0) == (now == 0) {
            return;
        }
        if let Some(t) = l
            .channel
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            // SAFETY: on the env's JS thread, with a live function (it leaves the channel
            // before it is released).
            unsafe {
                if now > 0 {
                    sys::napi_ref_threadsafe_function(env, t.0);
                } else {
                    sys::napi_unref_threadsafe_function(env, t.0);
                }
            }
        }
    });
}

/// This thread's channel for `env`, made on first use.
fn channel(env: sys::napi_env) -> napi::Result<Arc<Channel>> {
    if let Some(c) = LOCAL.with_borrow(|l| {
        l.as_ref()
            .filter(|l| l.env == env)
            .map(|l| l.channel.clone())
    }) {
        return Ok(c);
    }
    let mut name = ptr::null_mut();
    let mut tsfn = ptr::null_mut();
    // SAFETY: on the JS thread with its env. No JS function: `call_js` settles the promises.
    unsafe {
        check(
            sys::napi_create_string_utf8(env, c"kern-sandbox:settle".as_ptr(), 19, &mut name),
            "naming the settle function",
        )?;
        check(
            sys::napi_create_threadsafe_function(
                env,
                ptr::null_mut(),
                ptr::null_mut(),
                name,
                0,
                1,
                ptr::null_mut(),
                None,
                ptr::null_mut(),
                Some(call_js),
                &mut tsfn,
            ),
            "creating the settle function",
        )?;
        sys::napi_unref_threadsafe_function(env, tsfn);
    }
    let channel = Arc::new(Channel(Mutex::new(Some(Tsfn(tsfn)))));
    // Registered after the function is made, so it runs before Node's own teardown of it (cleanup
    // hooks run last-registered first): from then on no thread calls it.
    let data = Arc::into_raw(channel.clone()) as *mut c_void;
    // SAFETY: `data` is an Arc the hook takes back, once.
    let hooked = unsafe { sys::napi_add_env_cleanup_hook(env, Some(env_gone), data) };
    if let Err(e) = check(hooked, "registering the settle function's cleanup") {
        // SAFETY: the hook was not registered, so `data` is still ours.
        env_gone(data);
        return Err(e);
    }
    LOCAL.set(Some(Local {
        env,
        channel: channel.clone(),
        pending: Cell::new(0),
    }));
    Ok(channel)
}

/// The env is going away: no thread calls its function from now on; it is released.
extern "C" fn env_gone(data: *mut c_void) {
    // SAFETY: the Arc `channel` leaked for this hook.
    let channel = unsafe { Arc::from_raw(data as *const Channel) };
    let tsfn = channel.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(t) = tsfn {
        // SAFETY: taken out of the channel under its lock, so no other thread still calls it.
        unsafe {
            sys::napi_release_threadsafe_function(t.0, sys::ThreadsafeFunctionReleaseMode::abort)
        };
    }
    // `try_with`: a thread that is exiting may have dropped its locals already.
    let _ = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        if l.as_ref()
            .is_some_and(|l| Arc::ptr_eq(&l.channel, &channel))
        {
            *l = None;
        }
    });
}

/// Settles one call's promise, on the JS thread.
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut c_void,
    data: *mut c_void,
) {
    // SAFETY: every queued job is a Box<Settle> that `send` gave up.
    let job = unsafe { Box::from_raw(data.cast::<Settle>()) };
    if env.is_null() {
        return; // the function is closing with its env: nothing left to settle
    }
    ended(env);
    let Settle { deferred, outcome } = *job;
    // SAFETY: on the JS thread with its env; the deferred is settled exactly once.
    unsafe {
        let value = outcome.and_then(|make| make(env));
        let status = match value {
            Ok(v) => sys::napi_resolve_deferred(env, deferred, v),
            Err(e) => match ToNapiValue::to_napi_value(env, e) {
                Ok(err) => sys::napi_reject_deferred(env, deferred, err),
                Err(_) => sys::Status::napi_generic_failure,
            },
        };
        if status != sys::Status::napi_ok {
            // Making the value threw: the promise rejects with what was thrown.
            let mut thrown = ptr::null_mut();
            if sys::napi_get_and_clear_last_exception(env, &mut thrown) == sys::Status::napi_ok
                && !thrown.is_null()
            {
                sys::napi_reject_deferred(env, deferred, thrown);
            }
        }
    }
}
