//! Captured output on its way to JS: a result's capture as a string, copied or (large ASCII
//! output) as a V8 external string over the capture itself; a streamed chunk as a Buffer over the
//! chunk itself.

use std::ffi::{c_char, c_void};
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use napi::bindgen_prelude::ToNapiValue;
use napi::{check_status, sys};

use super::trim;

/// A capture on its way to JS as a string. Large ASCII output becomes an external V8 string over
/// the capture itself, so the result does not hold a second copy of up to `maxOutputBytes`; the
/// rest is copied, invalid UTF-8 replaced (U+FFFD) as before.
pub struct Text(pub Vec<u8>);

/// Below this, copying is cheaper than an external string and its finalizer.
const EXTERNAL_MIN: usize = 64 * 1024;
/// V8's `String::kMaxLength` (64-bit). Past it V8 fails without saying whether it kept the buffer,
/// so such output takes the copying path (which fails as before).
const EXTERNAL_MAX: usize = (1 << 29) - 24;

type CreateExternalLatin1 = unsafe extern "C" fn(
    sys::napi_env,
    *mut c_char,
    isize,
    sys::napi_finalize,
    *mut c_void,
    *mut sys::napi_value,
    *mut bool,
) -> sys::napi_status;

/// `node_api_create_external_string_latin1` exists from Node 18.18 / 20.4 only, so it is looked up
/// at run time: napi-rs's `napi10` feature would call it unconditionally (ThreadsafeFunction too)
/// and break older Node.
fn create_external_latin1() -> Option<CreateExternalLatin1> {
    static FOUND: OnceLock<Option<CreateExternalLatin1>> = OnceLock::new();
    *FOUND.get_or_init(|| {
        // SAFETY: dlsym only reads the process's symbol tables.
        let sym = unsafe {
            libc::dlsym(
                libc::RTLD_DEFAULT,
                c"node_api_create_external_string_latin1".as_ptr(),
            )
        };
        // SAFETY: Node exports the function with this signature (js_native_api.h).
        (!sym.is_null())
            .then(|| unsafe { std::mem::transmute::<*mut c_void, CreateExternalLatin1>(sym) })
    })
}

/// Finalizer of an external string: frees the capture (`hint` carries its capacity).
///
/// # Safety
/// Only napi calls it, once, with the `data` and `hint` that [`external`] passed for a string it
/// created: the pointer and capacity of a leaked `Vec<u8>`.
unsafe extern "C" fn free_capture(_env: sys::napi_env, data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `data` and `hint` are the pointer and capacity of the Vec leaked in `external`.
    trim::free_now(unsafe { Vec::from_raw_parts(data.cast::<u8>(), 0, hint as usize) });
}

/// Lends `bytes` to a napi constructor that takes them over with a finalizer: `create` gets their
/// pointer, length and capacity (the finalizer's hint) and returns napi's status. On napi_ok the
/// finalizer owns them (also when Node copied them; then it already ran); otherwise they come
/// back.
fn lend(
    bytes: Vec<u8>,
    create: impl FnOnce(*mut u8, usize, *mut c_void) -> sys::napi_status,
) -> Result<(), Vec<u8>> {
    let mut bytes = ManuallyDrop::new(bytes);
    let (data, len, cap) = (bytes.as_mut_ptr(), bytes.len(), bytes.capacity());
    if create(data, len, cap as *mut c_void) == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(ManuallyDrop::into_inner(bytes))
    }
}

/// Hands `bytes` to V8 without copying; on failure they come back for the copying path.
///
/// # Safety
/// `env` is the live env of the current napi call, on its JS thread, and `create` is Node's
/// `node_api_create_external_string_latin1`.
unsafe fn external(
    env: sys::napi_env,
    create: CreateExternalLatin1,
    bytes: Vec<u8>,
) -> Result<sys::napi_value, Vec<u8>> {
    let mut out = std::ptr::null_mut();
    let mut copied = false;
    lend(bytes, |data, len, hint| {
        // SAFETY: the caller vouches for `env` and `create`; `data` is `len` valid bytes that
        // stay put until the finalizer frees them.
        unsafe {
            create(
                env,
                data.cast(),
                len as isize,
                Some(free_capture),
                hint,
                &mut out,
                &mut copied,
            )
        }
    })?;
    Ok(out)
}

impl ToNapiValue for Text {
    /// # Safety
    /// `env` is the live env napi-rs converts the call's result in, on its JS thread.
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut bytes = val.0;
        let mut out = std::ptr::null_mut();
        if !bytes.is_ascii() {
            let text = String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            check_status!(
                // SAFETY: `env` per this fn's contract; `text` is `len` valid UTF-8 bytes that V8
                // copies before the call returns.
                unsafe {
                    sys::napi_create_string_utf8(
                        env,
                        text.as_ptr().cast(),
                        text.len() as isize,
                        &mut out,
                    )
                },
                "Failed to create a {} byte string",
                text.len()
            )?;
            trim::free_now(text.into_bytes());
            return Ok(out);
        }
        if (EXTERNAL_MIN..=EXTERNAL_MAX).contains(&bytes.len()) {
            if let Some(create) = create_external_latin1() {
                // SAFETY: `env` per this fn's contract; `create` came from Node's symbol table.
                match unsafe { external(env, create, bytes) } {
                    Ok(v) => return Ok(v),
                    Err(b) => bytes = b,
                }
            }
        }
        // ASCII is Latin-1: V8 copies it without decoding.
        check_status!(
            // SAFETY: `env` per this fn's contract; `bytes` is `len` valid bytes that V8 copies
            // before the call returns.
            unsafe {
                sys::napi_create_string_latin1(
                    env,
                    bytes.as_ptr().cast(),
                    bytes.len() as isize,
                    &mut out,
                )
            },
            "Failed to create a {} byte string",
            bytes.len()
        )?;
        trim::free_now(bytes);
        Ok(out)
    }
}

/// A chunk of streamed output on its way to a JS callback: a Buffer over the chunk itself, whose
/// pages go back to the OS when V8 collects it. A flood streams hundreds of MB a second through
/// such Buffers; V8 frees them only at its next GC, all at once, and glibc would otherwise keep
/// that churn in its arenas for good (measured: RSS +4-18 MiB after a few seconds of `yes`).
pub struct Chunk(pub Vec<u8>);

/// Finalizer of a chunk's Buffer (`hint` carries its capacity).
///
/// # Safety
/// Only napi calls it, once, with the `data` and `hint` that [`Chunk`]'s conversion passed: the
/// pointer and capacity of a leaked `Vec<u8>`.
unsafe extern "C" fn free_chunk(_env: sys::napi_env, data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `data` and `hint` are the pointer and capacity of the Vec leaked by the conversion.
    trim::free_streamed(unsafe { Vec::from_raw_parts(data.cast::<u8>(), 0, hint as usize) });
}

impl ToNapiValue for Chunk {
    /// # Safety
    /// `env` is the live env of the JS thread the ThreadsafeFunction calls on.
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = std::ptr::null_mut();
        if val.0.is_empty() {
            check_status!(
                // SAFETY: `env` per this fn's contract; a zero-length Buffer needs no data.
                unsafe { sys::napi_create_buffer(env, 0, std::ptr::null_mut(), &mut out) },
                "Failed to create an empty Buffer"
            )?;
            return Ok(out);
        }
        let len = val.0.len();
        let mut status = sys::Status::napi_ok;
        // Bytes napi did not take are dropped here, as a failed conversion.
        let _ = lend(val.0, |data, len, hint| {
            // SAFETY: `env` per this fn's contract; `data` is `len` valid bytes that stay put
            // until the finalizer frees them.
            status = unsafe {
                sys::napi_create_external_buffer(
                    env,
                    len,
                    data.cast(),
                    Some(free_chunk),
                    hint,
                    &mut out,
                )
            };
            status
        });
        check_status!(status, "Failed to create a {} byte Buffer", len)?;
        Ok(out)
    }
}
