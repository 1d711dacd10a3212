//! The PMIx client calls, loaded from the system's `libpmix` at run time (`dlopen`), so that
//! neither the build nor a run outside a PMIx launch needs the library.
//!
//! The layouts below are those of PMIx 4 and 5 (`pmix_common.h`), on 64-bit Linux:
//! `pmix_proc_t` 260 bytes, `pmix_value_t` 32 with its union at 8, `pmix_info_t` 552 with
//! `flags` at 512 and `value` at 520. [`Pmix::load`] refuses other major versions.
//!
//! Everything exported here is safe to call: each wrapper owns the memory it hands to PMIx and
//! frees what PMIx returns.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

use libloading::Library;

/// `PMIX_MAX_NSLEN`: a namespace is at most 255 bytes.
pub const MAX_NSLEN: usize = 255;
/// `PMIX_MAX_KEYLEN`: a key is at most 511 bytes.
pub const MAX_KEYLEN: usize = 511;
/// `PMIX_RANK_WILDCARD`: the job as a whole, for job-level keys.
pub const RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_SUCCESS`.
pub const SUCCESS: i32 = 0;
/// `PMIX_ERR_NOT_FOUND`.
pub const ERR_NOT_FOUND: i32 = -46;

/// `PMIX_JOB_SIZE`: number of processes in the job (uint32).
pub const KEY_JOB_SIZE: &str = "pmix.job.size";
/// `PMIX_APPNUM`: this process's application number (uint32).
pub const KEY_APPNUM: &str = "pmix.appnum";
/// `PMIX_NUM_NODES`: number of nodes the job spans (uint32).
pub const KEY_NUM_NODES: &str = "pmix.num.nodes";
/// `PMIX_NODEID`: the node a process runs on (uint32, process-level).
pub const KEY_NODEID: &str = "pmix.nodeid";

const TYPE_BOOL: u16 = 1;
const TYPE_SIZE: u16 = 4;
const TYPE_INT: u16 = 6;
const TYPE_INT32: u16 = 9;
const TYPE_UINT: u16 = 11;
const TYPE_UINT8: u16 = 12;
const TYPE_UINT16: u16 = 13;
const TYPE_UINT32: u16 = 14;
const TYPE_UINT64: u16 = 15;
const TYPE_BYTE_OBJECT: u16 = 27;
/// `PMIX_GLOBAL`: share with local and remote processes.
const SCOPE_GLOBAL: u8 = 3;
const INFO_COLLECT_DATA: &[u8] = b"pmix.collect";
const INFO_TIMEOUT: &[u8] = b"pmix.timeout";
/// `PMIX_OPTIONAL`: look in the local store only, do not ask the server for missing data.
const INFO_OPTIONAL: &[u8] = b"pmix.optional";

#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; MAX_NSLEN + 1],
    rank: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct ByteObject {
    bytes: *mut c_char,
    size: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
union ValueData {
    flag: bool,
    integer: c_int,
    size: usize,
    uint8: u8,
    uint16: u16,
    uint32: u32,
    uint64: u64,
    bo: ByteObject,
    /// The union's full size in PMIx 4/5 (its largest members are three words).
    raw: [u64; 3],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Value {
    kind: u16,
    data: ValueData,
}

#[repr(C)]
struct Info {
    key: [c_char; MAX_KEYLEN + 1],
    flags: u32,
    value: Value,
}

const _: () = assert!(std::mem::size_of::<Proc>() == 260);
const _: () = assert!(std::mem::size_of::<Value>() == 32);
const _: () = assert!(std::mem::size_of::<Info>() == 552);

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> i32;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> i32;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> i32;
type CommitFn = unsafe extern "C" fn() -> i32;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> i32;
type GetFn =
    unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> i32;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> i32;
type StringFn = unsafe extern "C" fn() -> *const c_char;
type ErrorStringFn = unsafe extern "C" fn(i32) -> *const c_char;
type ValueDestructFn = unsafe extern "C" fn(*mut Value);

extern "C" {
    fn free(ptr: *mut c_void);
}

/// The loaded library's entry points. The library is never unloaded: PMIx keeps a progress
/// thread running inside it.
pub struct Pmix {
    init: InitFn,
    finalize: FinalizeFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    abort: AbortFn,
    error_string: ErrorStringFn,
    value_destruct: ValueDestructFn,
    version: String,
}

/// This process in the job, as `PMIx_Init` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Me {
    pub namespace: String,
    pub rank: u32,
}

/// A PMIx status other than success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status(pub i32);

static LOADED: OnceLock<Result<Pmix, String>> = OnceLock::new();

/// Names tried in order: the runtime package's soname, then the development link.
const LIBRARY_NAMES: [&str; 2] = ["libpmix.so.2", "libpmix.so"];

impl Pmix {
    /// Loads the library once per process; later calls return the same result.
    pub fn load() -> Result<&'static Pmix, String> {
        LOADED
            .get_or_init(Self::open)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn open() -> Result<Pmix, String> {
        let mut problems = Vec::new();
        for name in LIBRARY_NAMES {
            // SAFETY: loading libpmix runs its initializers, which only set up the library's
            // own state; no other code of this process depends on them.
            match unsafe { Library::new(name) } {
                Ok(library) => return Self::bind(library),
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        Err(problems.join("; "))
    }

    fn bind(library: Library) -> Result<Pmix, String> {
        macro_rules! symbol {
            ($name:literal, $type:ty) => {{
                // SAFETY: the symbol is PMIx's exported function of that name, whose C
                // prototype (pmix.h, PMIx 4/5) is the function type given here.
                let symbol = unsafe { library.get::<$type>($name.as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?;
                *symbol
            }};
        }
        let get_version: StringFn = symbol!("PMIx_Get_version", StringFn);
        // SAFETY: PMIx_Get_version returns a static NUL-terminated string (or NULL).
        let version = unsafe { c_string(get_version()) };
        let major = version
            .split(|c: char| !c.is_ascii_digit())
            .find(|part| !part.is_empty())
            .and_then(|part| part.parse::<u32>().ok());
        if !matches!(major, Some(4 | 5)) {
            return Err(format!(
                "PMIx version \"{version}\" is not 4 or 5, whose data layout this build knows"
            ));
        }
        let pmix = Pmix {
            init: symbol!("PMIx_Init", InitFn),
            finalize: symbol!("PMIx_Finalize", FinalizeFn),
            put: symbol!("PMIx_Put", PutFn),
            commit: symbol!("PMIx_Commit", CommitFn),
            fence: symbol!("PMIx_Fence", FenceFn),
            get: symbol!("PMIx_Get", GetFn),
            abort: symbol!("PMIx_Abort", AbortFn),
            error_string: symbol!("PMIx_Error_string", ErrorStringFn),
            value_destruct: symbol!("PMIx_Value_destruct", ValueDestructFn),
            version,
        };
        // The function pointers stay valid for the life of the process.
        std::mem::forget(library);
        Ok(pmix)
    }

    /// The library's version string.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// PMIx's description of a status code.
    pub fn describe(&self, status: Status) -> String {
        // SAFETY: PMIx_Error_string takes any integer and returns a static string or NULL.
        let text = unsafe { c_string((self.error_string)(status.0)) };
        format!("{text} ({})", status.0)
    }

    /// `PMIx_Init` without attributes: connects to the launcher's PMIx server.
    pub fn init(&self) -> Result<Me, Status> {
        let mut me = Proc {
            nspace: [0; MAX_NSLEN + 1],
            rank: 0,
        };
        // SAFETY: `me` is a valid pmix_proc_t for PMIx to fill; no attributes are passed.
        check(unsafe { (self.init)(&mut me, std::ptr::null_mut(), 0) })?;
        // SAFETY: PMIx wrote a NUL-terminated namespace within the array (it was zeroed and
        // PMIx writes at most PMIX_MAX_NSLEN bytes).
        let namespace = unsafe { c_string(me.nspace.as_ptr()) };
        Ok(Me {
            namespace,
            rank: me.rank,
        })
    }

    /// `PMIx_Put` of `bytes` as a byte object under `key`, visible to every process of the job
    /// after a commit and fence.
    pub fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Status> {
        let key = key_string(key)?;
        let mut value = Value {
            kind: TYPE_BYTE_OBJECT,
            data: ValueData {
                bo: ByteObject {
                    bytes: bytes.as_ptr() as *mut c_char,
                    size: bytes.len(),
                },
            },
        };
        // SAFETY: key and value are valid for the call; PMIx copies the bytes and does not
        // write through the pointer.
        check(unsafe { (self.put)(SCOPE_GLOBAL, key.as_ptr(), &mut value) })
    }

    /// `PMIx_Commit`: hands this process's puts to the local server.
    pub fn commit(&self) -> Result<(), Status> {
        // SAFETY: no arguments.
        check(unsafe { (self.commit)() })
    }

    /// `PMIx_Fence` over every process of this job, with `PMIX_COLLECT_DATA` (every process
    /// receives every committed value) and `PMIX_TIMEOUT` in whole seconds (at least 1).
    pub fn fence(&self, collect: bool, timeout_seconds: u32) -> Result<(), Status> {
        let mut infos = [
            info_flag(INFO_COLLECT_DATA, collect),
            info_int(INFO_TIMEOUT, timeout_seconds),
        ];
        // SAFETY: NULL procs means all processes of our namespace; the info array is valid
        // for the call and holds only scalar values.
        check(unsafe { (self.fence)(std::ptr::null(), 0, infos.as_mut_ptr(), infos.len()) })
    }

    /// `PMIx_Get` of a byte object that `rank` of `namespace` put under `key`, from the local
    /// store only (`PMIX_OPTIONAL`): after a collecting fence every value is there, and a
    /// missing key is reported at once instead of awaited.
    pub fn get_bytes(
        &self,
        namespace: &str,
        rank: u32,
        key: &str,
        timeout_seconds: u32,
    ) -> Result<Vec<u8>, Status> {
        self.get(namespace, rank, key, timeout_seconds, true, |value| {
            // SAFETY: `value` points to a valid pmix_value_t returned by PMIx_Get.
            let value = unsafe { &*value };
            match value.kind {
                // SAFETY: the type says the union holds a byte object whose bytes PMIx owns.
                TYPE_BYTE_OBJECT => unsafe {
                    let bo = value.data.bo;
                    Some(if bo.bytes.is_null() || bo.size == 0 {
                        Vec::new()
                    } else {
                        std::slice::from_raw_parts(bo.bytes as *const u8, bo.size).to_vec()
                    })
                },
                _ => None,
            }
        })
    }

    /// `PMIx_Get` of an unsigned job-level or process-level number.
    pub fn get_number(
        &self,
        namespace: &str,
        rank: u32,
        key: &str,
        timeout_seconds: u32,
    ) -> Result<u64, Status> {
        self.number(namespace, rank, key, timeout_seconds, false)
    }

    /// [`Pmix::get_number`] from the local store only (`PMIX_OPTIONAL`): for data the server
    /// hands every process at start, where a missing value is not worth a wait.
    pub fn get_local_number(
        &self,
        namespace: &str,
        rank: u32,
        key: &str,
        timeout_seconds: u32,
    ) -> Result<u64, Status> {
        self.number(namespace, rank, key, timeout_seconds, true)
    }

    fn number(
        &self,
        namespace: &str,
        rank: u32,
        key: &str,
        timeout_seconds: u32,
        local_only: bool,
    ) -> Result<u64, Status> {
        self.get(namespace, rank, key, timeout_seconds, local_only, |value| {
            // SAFETY: `value` points to a valid pmix_value_t returned by PMIx_Get; each arm
            // reads the union member its type names.
            unsafe {
                let value = &*value;
                match value.kind {
                    TYPE_UINT8 => Some(u64::from(value.data.uint8)),
                    TYPE_UINT16 => Some(u64::from(value.data.uint16)),
                    TYPE_UINT32 => Some(u64::from(value.data.uint32)),
                    TYPE_UINT64 => Some(value.data.uint64),
                    TYPE_SIZE => Some(value.data.size as u64),
                    TYPE_UINT => Some(u64::from(value.data.uint32)),
                    TYPE_INT | TYPE_INT32 => u64::try_from(value.data.integer).ok(),
                    _ => None,
                }
            }
        })
    }

    fn get<T>(
        &self,
        namespace: &str,
        rank: u32,
        key: &str,
        timeout_seconds: u32,
        local_only: bool,
        read: impl FnOnce(*const Value) -> Option<T>,
    ) -> Result<T, Status> {
        let key = key_string(key)?;
        let proc_ = proc_of(namespace, rank)?;
        let infos = [
            info_int(INFO_TIMEOUT, timeout_seconds),
            info_flag(INFO_OPTIONAL, local_only),
        ];
        let mut value: *mut Value = std::ptr::null_mut();
        // SAFETY: proc, key and info are valid for the call; PMIx stores a pointer to a value
        // it allocated in `value`.
        check(unsafe {
            (self.get)(
                &proc_,
                key.as_ptr(),
                infos.as_ptr(),
                infos.len(),
                &mut value,
            )
        })?;
        if value.is_null() {
            return Err(Status(ERR_NOT_FOUND));
        }
        let result = read(value);
        // SAFETY: `value` came from PMIx_Get (malloc'ed by PMIx): its contents are released by
        // PMIx_Value_destruct, the struct itself by free, as PMIX_VALUE_RELEASE does.
        unsafe {
            (self.value_destruct)(value);
            free(value.cast());
        }
        // A value of another type than asked for is "not found" for the caller.
        result.ok_or(Status(ERR_NOT_FOUND))
    }

    /// `PMIx_Abort` of the whole job with `code`; the launcher prints `message`.
    pub fn abort(&self, code: i32, message: &str) -> Result<(), Status> {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: NULL procs means every process of our namespace; the message is a valid C
        // string for the call.
        check(unsafe { (self.abort)(code, message.as_ptr(), std::ptr::null_mut(), 0) })
    }

    /// `PMIx_Finalize` without attributes.
    pub fn finalize(&self) -> Result<(), Status> {
        // SAFETY: no attributes are passed.
        check(unsafe { (self.finalize)(std::ptr::null(), 0) })
    }
}

fn check(status: i32) -> Result<(), Status> {
    if status == SUCCESS {
        Ok(())
    } else {
        Err(Status(status))
    }
}

/// `PMIX_ERR_BAD_PARAM`, for keys and namespaces PMIx could not hold.
const ERR_BAD_PARAM: i32 = -27;

fn key_string(key: &str) -> Result<CString, Status> {
    if key.len() > MAX_KEYLEN {
        return Err(Status(ERR_BAD_PARAM));
    }
    CString::new(key).map_err(|_| Status(ERR_BAD_PARAM))
}

fn proc_of(namespace: &str, rank: u32) -> Result<Proc, Status> {
    if namespace.len() > MAX_NSLEN || namespace.contains('\0') {
        return Err(Status(ERR_BAD_PARAM));
    }
    let mut proc_ = Proc {
        nspace: [0; MAX_NSLEN + 1],
        rank,
    };
    for (slot, byte) in proc_.nspace.iter_mut().zip(namespace.bytes()) {
        *slot = byte as c_char;
    }
    Ok(proc_)
}

fn info_key(key: &[u8]) -> [c_char; MAX_KEYLEN + 1] {
    let mut field = [0 as c_char; MAX_KEYLEN + 1];
    for (slot, byte) in field.iter_mut().zip(key) {
        *slot = *byte as c_char;
    }
    field
}

fn info_flag(key: &[u8], flag: bool) -> Info {
    Info {
        key: info_key(key),
        flags: 0,
        value: Value {
            kind: TYPE_BOOL,
            data: ValueData {
                raw: [u64::from(flag), 0, 0],
            },
        },
    }
}

fn info_int(key: &[u8], number: u32) -> Info {
    let integer = c_int::try_from(number).unwrap_or(c_int::MAX);
    let mut data = ValueData { raw: [0; 3] };
    data.integer = integer;
    Info {
        key: info_key(key),
        flags: 0,
        value: Value {
            kind: TYPE_INT,
            data,
        },
    }
}

/// Copies a C string PMIx returned; NULL gives an empty string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for the call.
unsafe fn c_string(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller guarantees a valid NUL-terminated string.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}
