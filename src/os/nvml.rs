//! NVIDIA GPUs through NVML, loaded at run time (`dlopen` of `libnvidia-ml.so.1`, as the
//! NVIDIA container toolkit mounts it): a node without the library simply has no GPUs.
//! Only the calls the Device report and its GPU health watch (Xid events) need are bound;
//! every one goes through NVML's C ABI with buffers koord owns.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::path::Path;

use libloading::Library;

/// NVML's library name, found through the dynamic loader's search path.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    #[error("{0}: {1}")]
    Load(String, String),
    #[error("{call}: NVML error {code}")]
    Call { call: &'static str, code: c_int },
}

/// One GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub uuid: String,
    pub minor: u32,
    /// Product name (`NVIDIA A100-SXM4-80GB`).
    pub model: String,
    pub memory_total: u64,
    pub memory_used: u64,
    /// Percent of time a kernel ran over the last sample period.
    pub util_gpu: u32,
    pub util_memory: u32,
    /// PCI bus id, `0000:10:00.0` (sysfs spelling).
    pub bus_id: String,
    /// Compute processes with a utilisation sample (empty where NVML cannot say).
    pub processes: Vec<GpuProcess>,
}

/// One process on a GPU: its memory and the SM utilisation of its last sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuProcess {
    pub pid: u32,
    pub memory_used: u64,
    /// Percent.
    pub sm_util: u32,
}

type Device = *mut c_void;
type Init = unsafe extern "C" fn() -> c_int;
type Count = unsafe extern "C" fn(*mut c_uint) -> c_int;
type ByIndex = unsafe extern "C" fn(c_uint, *mut Device) -> c_int;
type Text = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int;
type Minor = unsafe extern "C" fn(Device, *mut c_uint) -> c_int;
type Memory = unsafe extern "C" fn(Device, *mut MemoryInfo) -> c_int;
type Utilization = unsafe extern "C" fn(Device, *mut UtilRates) -> c_int;
type Pci = unsafe extern "C" fn(Device, *mut PciInfo) -> c_int;
type Driver = unsafe extern "C" fn(*mut c_char, c_uint) -> c_int;
type EventSet = *mut c_void;
type SetCreate = unsafe extern "C" fn(*mut EventSet) -> c_int;
type SetFree = unsafe extern "C" fn(EventSet) -> c_int;
type Register = unsafe extern "C" fn(Device, c_ulonglong, EventSet) -> c_int;
type Wait = unsafe extern "C" fn(EventSet, *mut EventData, c_uint) -> c_int;
type Running = unsafe extern "C" fn(Device, *mut c_uint, *mut ProcessInfo) -> c_int;
type ProcUtil = unsafe extern "C" fn(Device, *mut ProcessSample, *mut c_uint, c_ulonglong) -> c_int;

/// `nvmlEventTypeXidCriticalError`.
const XID_CRITICAL_ERROR: c_ulonglong = 0x8;
const ERROR_NOT_SUPPORTED: c_int = 3;
const ERROR_TIMEOUT: c_int = 10;
const ERROR_INSUFFICIENT_SIZE: c_int = 7;
const ERROR_NOT_FOUND: c_int = 6;
/// At most this many processes are read from one GPU.
const MAX_PROCESSES: usize = 4096;

/// `nvmlProcessInfo_t` (the `_v3` call's).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// `nvmlProcessUtilizationSample_t`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProcessSample {
    pid: c_uint,
    time_stamp: c_ulonglong,
    sm_util: c_uint,
    mem_util: c_uint,
    enc_util: c_uint,
    dec_util: c_uint,
}

/// NVML's per-process calls; without them (old drivers) pods have no GPU usage.
#[derive(Clone, Copy)]
struct ProcessFns {
    running: Running,
    util: ProcUtil,
}

#[repr(C)]
struct EventData {
    device: Device,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// NVML's event calls; older drivers (and libraries without them) have no health watch.
#[derive(Clone, Copy)]
struct EventFns {
    create: SetCreate,
    free: SetFree,
    register: Register,
    wait: Wait,
}

#[repr(C)]
#[derive(Default)]
struct MemoryInfo {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

#[repr(C)]
#[derive(Default)]
struct UtilRates {
    gpu: c_uint,
    memory: c_uint,
}

#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

/// NVML's entry points, resolved once when the library is opened.
struct Fns {
    count: Count,
    by_index: ByIndex,
    minor: Minor,
    memory: Memory,
    utilization: Utilization,
    pci: Pci,
    uuid: Text,
    name: Text,
    driver: Driver,
    shutdown: Init,
    events: Option<EventFns>,
    processes: Option<ProcessFns>,
}

/// An initialised NVML; shut down on drop. The function pointers stay valid while `_lib`
/// (declared last, so dropped last) is loaded.
pub struct Nvml {
    fns: Fns,
    _lib: Library,
}

fn check(call: &'static str, code: c_int) -> Result<(), NvmlError> {
    if code == 0 {
        Ok(())
    } else {
        Err(NvmlError::Call { call, code })
    }
}

/// A NUL-terminated buffer NVML filled, as text (lossy: NVML writes ASCII).
fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn sym<T: Copy>(lib: &Library, name: &'static str) -> Result<T, NvmlError> {
    let c = format!("{name}\0");
    // SAFETY: every caller names T as the C signature NVML documents for `name`.
    unsafe { lib.get::<T>(c.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| NvmlError::Load(name.to_string(), e.to_string()))
}

impl Nvml {
    /// Loads and initialises NVML from `library` (a name the loader searches or a path).
    /// `Ok(None)` when the library is not there: no NVIDIA driver, no GPUs.
    pub fn open(library: &str) -> Result<Option<Nvml>, NvmlError> {
        if library.contains('/') && !Path::new(library).exists() {
            return Ok(None);
        }
        // SAFETY: loading runs the library's initialisers; NVML's (and the test stand-in's)
        // have no preconditions. A missing library is an error we turn into "no GPUs".
        let lib = match unsafe { Library::new(library) } {
            Ok(l) => l,
            Err(e) if e.to_string().contains("No such file") => return Ok(None),
            Err(e) => return Err(NvmlError::Load(library.to_string(), e.to_string())),
        };
        let init: Init = sym(&lib, "nvmlInit_v2")?;
        let fns = Fns {
            count: sym(&lib, "nvmlDeviceGetCount_v2")?,
            by_index: sym(&lib, "nvmlDeviceGetHandleByIndex_v2")?,
            minor: sym(&lib, "nvmlDeviceGetMinorNumber")?,
            memory: sym(&lib, "nvmlDeviceGetMemoryInfo")?,
            utilization: sym(&lib, "nvmlDeviceGetUtilizationRates")?,
            pci: sym(&lib, "nvmlDeviceGetPciInfo_v3")?,
            uuid: sym(&lib, "nvmlDeviceGetUUID")?,
            name: sym(&lib, "nvmlDeviceGetName")?,
            driver: sym(&lib, "nvmlSystemGetDriverVersion")?,
            shutdown: sym(&lib, "nvmlShutdown")?,
            events: event_fns(&lib),
            processes: process_fns(&lib),
        };
        // SAFETY: nvmlInit_v2 takes no arguments.
        check("nvmlInit_v2", unsafe { init() })?;
        Ok(Some(Nvml { fns, _lib: lib }))
    }

    /// `nvmlSystemGetDriverVersion`.
    pub fn driver_version(&self) -> Result<String, NvmlError> {
        let f = self.fns.driver;
        let mut buf = [0 as c_char; 96];
        // SAFETY: NVML writes at most `len` bytes, NUL included, into our buffer.
        check("nvmlSystemGetDriverVersion", unsafe {
            f(buf.as_mut_ptr(), buf.len() as c_uint)
        })?;
        Ok(text(&buf))
    }

    /// Every GPU, in NVML's index order.
    pub fn gpus(&self) -> Result<Vec<Gpu>, NvmlError> {
        let (count, by_index) = (self.fns.count, self.fns.by_index);
        let mut n: c_uint = 0;
        // SAFETY: NVML writes one unsigned int.
        check("nvmlDeviceGetCount_v2", unsafe { count(&mut n) })?;
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            let mut dev: Device = std::ptr::null_mut();
            // SAFETY: NVML writes one opaque handle, valid until nvmlShutdown (our Drop).
            check("nvmlDeviceGetHandleByIndex_v2", unsafe {
                by_index(i, &mut dev)
            })?;
            out.push(self.gpu(dev)?);
        }
        Ok(out)
    }

    fn text_of(&self, name: &'static str, f: Text, dev: Device) -> Result<String, NvmlError> {
        let mut buf = [0 as c_char; 96];
        // SAFETY: `dev` came from NVML; it writes at most `len` bytes into our buffer.
        check(name, unsafe {
            f(dev, buf.as_mut_ptr(), buf.len() as c_uint)
        })?;
        Ok(text(&buf))
    }

    fn gpu(&self, dev: Device) -> Result<Gpu, NvmlError> {
        let f = &self.fns;
        let (minor_f, memory_f, util_f, pci_f) = (f.minor, f.memory, f.utilization, f.pci);
        let (mut minor, mut mem, mut util) = (0, MemoryInfo::default(), UtilRates::default());
        let mut pci = PciInfo {
            bus_id_legacy: [0; 16],
            domain: 0,
            bus: 0,
            device: 0,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        };
        // SAFETY: each call writes one struct of the layout declared above (NVML's ABI)
        // through a pointer to our own value; `dev` came from NVML.
        unsafe {
            check("nvmlDeviceGetMinorNumber", minor_f(dev, &mut minor))?;
            check("nvmlDeviceGetMemoryInfo", memory_f(dev, &mut mem))?;
            check("nvmlDeviceGetUtilizationRates", util_f(dev, &mut util))?;
            check("nvmlDeviceGetPciInfo_v3", pci_f(dev, &mut pci))?;
        }
        Ok(Gpu {
            uuid: self.text_of("nvmlDeviceGetUUID", f.uuid, dev)?,
            minor,
            model: self.text_of("nvmlDeviceGetName", f.name, dev)?,
            memory_total: mem.total,
            memory_used: mem.used,
            util_gpu: util.gpu,
            util_memory: util.memory,
            bus_id: sysfs_bus_id(&text(&pci.bus_id)),
            processes: self.processes(dev).unwrap_or_else(|e| {
                tracing::debug!(error = %e, "GPU processes not read");
                Vec::new()
            }),
        })
    }

    /// The GPU's compute processes that have a utilisation sample (as Koordinator pairs
    /// `GetComputeRunningProcesses` with `GetProcessUtilization`).
    fn processes(&self, dev: Device) -> Result<Vec<GpuProcess>, NvmlError> {
        let Some(p) = self.fns.processes else {
            return Ok(Vec::new());
        };
        // SAFETY: NVML writes at most `*n` entries of the declared layouts into our
        // buffer and sets `*n`; `dev` came from NVML.
        let running = fill(
            "nvmlDeviceGetComputeRunningProcesses_v3",
            16,
            |b, n| unsafe { (p.running)(dev, n, b) },
        )?;
        if running.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: as above.
        let samples = fill("nvmlDeviceGetProcessUtilization", 16, |b, n| unsafe {
            (p.util)(dev, b, n, 0)
        })?;
        Ok(running
            .iter()
            .filter_map(|r: &ProcessInfo| {
                let s = samples.iter().find(|s: &&ProcessSample| s.pid == r.pid)?;
                Some(GpuProcess {
                    pid: r.pid,
                    memory_used: r.used_gpu_memory,
                    sm_util: s.sm_util,
                })
            })
            .collect())
    }
}

fn process_fns(lib: &Library) -> Option<ProcessFns> {
    Some(ProcessFns {
        running: sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3").ok()?,
        util: sym(lib, "nvmlDeviceGetProcessUtilization").ok()?,
    })
}

/// Calls an NVML "fill this array" function: with room for `guess`, then, on
/// `INSUFFICIENT_SIZE`, with room for the count it asked (bounded); `NOT_FOUND` is none.
fn fill<T: Default + Clone>(
    call: &'static str,
    guess: usize,
    mut f: impl FnMut(*mut T, *mut c_uint) -> c_int,
) -> Result<Vec<T>, NvmlError> {
    let mut buf = vec![T::default(); guess];
    for _ in 0..2 {
        let mut n = buf.len() as c_uint;
        match f(buf.as_mut_ptr(), &mut n) {
            ERROR_INSUFFICIENT_SIZE if (n as usize) <= MAX_PROCESSES => {
                buf = vec![T::default(); n as usize];
            }
            ERROR_NOT_FOUND => return Ok(Vec::new()),
            code => {
                check(call, code)?;
                buf.truncate(n as usize);
                return Ok(buf);
            }
        }
    }
    Err(NvmlError::Call {
        call,
        code: ERROR_INSUFFICIENT_SIZE,
    })
}

fn event_fns(lib: &Library) -> Option<EventFns> {
    Some(EventFns {
        create: sym(lib, "nvmlEventSetCreate").ok()?,
        free: sym(lib, "nvmlEventSetFree").ok()?,
        register: sym(lib, "nvmlDeviceRegisterEvents").ok()?,
        wait: sym(lib, "nvmlEventSetWait_v2").ok()?,
    })
}

/// An Xid critical error NVML reported: on the GPU at `bus_id`, or on every GPU when NVML
/// could not say which (`None`, an empty uuid upstream).
#[derive(Debug, Clone, PartialEq)]
pub struct XidEvent {
    pub bus_id: Option<String>,
    pub xid: u64,
}

/// Every GPU registered for Xid critical errors in one NVML event set; freed on drop.
pub struct XidWatch<'a> {
    nvml: &'a Nvml,
    fns: EventFns,
    set: EventSet,
    /// Bus ids of GPUs too old to report events (NVML said not supported).
    pub unsupported: Vec<String>,
}

impl Nvml {
    /// Registers every GPU for Xid critical errors (`nvmlDeviceRegisterEvents`). `Ok(None)`
    /// when this NVML has no event calls.
    pub fn watch_xids(&self) -> Result<Option<XidWatch<'_>>, NvmlError> {
        let Some(fns) = self.fns.events else {
            return Ok(None);
        };
        let mut set: EventSet = std::ptr::null_mut();
        // SAFETY: NVML writes one opaque handle, freed in XidWatch's Drop.
        check("nvmlEventSetCreate", unsafe { (fns.create)(&mut set) })?;
        let mut watch = XidWatch {
            nvml: self,
            fns,
            set,
            unsupported: Vec::new(),
        };
        let (count, by_index) = (self.fns.count, self.fns.by_index);
        let mut n: c_uint = 0;
        // SAFETY: NVML writes one unsigned int.
        check("nvmlDeviceGetCount_v2", unsafe { count(&mut n) })?;
        for i in 0..n {
            let mut dev: Device = std::ptr::null_mut();
            // SAFETY: NVML writes one opaque handle, valid until nvmlShutdown.
            check("nvmlDeviceGetHandleByIndex_v2", unsafe {
                by_index(i, &mut dev)
            })?;
            // SAFETY: `dev` and `set` came from NVML.
            match unsafe { (fns.register)(dev, XID_CRITICAL_ERROR, set) } {
                0 => {}
                ERROR_NOT_SUPPORTED => watch.unsupported.push(self.bus_id_of(dev)?),
                code => {
                    return Err(NvmlError::Call {
                        call: "nvmlDeviceRegisterEvents",
                        code,
                    });
                }
            }
        }
        Ok(Some(watch))
    }

    fn bus_id_of(&self, dev: Device) -> Result<String, NvmlError> {
        Ok(self.gpu(dev)?.bus_id)
    }
}

impl XidWatch<'_> {
    /// The next Xid critical error within `timeout_ms` (`nvmlEventSetWait_v2`); `Ok(None)`
    /// when none came.
    pub fn wait(&self, timeout_ms: u32) -> Result<Option<XidEvent>, NvmlError> {
        let mut e = EventData {
            device: std::ptr::null_mut(),
            event_type: 0,
            event_data: 0,
            gpu_instance_id: 0,
            compute_instance_id: 0,
        };
        // SAFETY: NVML fills one nvmlEventData_t (the layout above) we own.
        match unsafe { (self.fns.wait)(self.set, &mut e, timeout_ms) } {
            0 if e.event_type == XID_CRITICAL_ERROR => {}
            0 | ERROR_TIMEOUT => return Ok(None),
            code => {
                return Err(NvmlError::Call {
                    call: "nvmlEventSetWait_v2",
                    code,
                });
            }
        }
        let bus_id = if e.device.is_null() {
            None
        } else {
            let gpu = self.nvml.gpu(e.device)?;
            (!gpu.uuid.is_empty()).then_some(gpu.bus_id)
        };
        Ok(Some(XidEvent {
            bus_id,
            xid: e.event_data,
        }))
    }
}

impl Drop for XidWatch<'_> {
    fn drop(&mut self) {
        // SAFETY: the set came from nvmlEventSetCreate and is freed once.
        let _ = unsafe { (self.fns.free)(self.set) };
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: nvmlShutdown takes no arguments; no handle outlives `self`.
        let _ = unsafe { (self.fns.shutdown)() };
    }
}

/// NVML's `00000000:10:00.0` as sysfs spells it: `0000:10:00.0`, lower case.
pub fn sysfs_bus_id(nvml: &str) -> String {
    let lower = nvml.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => lower,
    }
}

impl std::fmt::Debug for Nvml {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nvml")
    }
}
