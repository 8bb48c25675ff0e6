//! The classifier that steers host-network pods: a two-instruction BPF program that
//! returns the sending socket's `net_cls.classid`, which `cls_bpf` (without direct action)
//! takes as the class. This is what the kernel's `cgroup` classifier does (Koordinator's
//! `tc filter … cgroup`), for kernels built without that classifier but with BPF.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `BPF_PROG_LOAD`.
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_PROG_TYPE_SCHED_CLS`.
const SCHED_CLS: u32 = 3;
/// `BPF_FUNC_get_cgroup_classid`.
const GET_CGROUP_CLASSID: i32 = 17;
/// The program's name, in the kernel and on the filter.
pub const NAME: &str = "koord_netcls";

#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

/// The first fields of `union bpf_attr` for `BPF_PROG_LOAD`; the kernel takes a shorter
/// attribute than its own as long as what it leaves out would be zero.
#[repr(C)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// Loads the program; the descriptor is needed only until a filter holds it.
pub fn classid_program() -> io::Result<OwnedFd> {
    // r0 = bpf_get_cgroup_classid(r1 = skb); return r0 (0: no class, the next filter).
    let insns = [
        Insn {
            code: 0x85, // BPF_JMP | BPF_CALL
            regs: 0,
            off: 0,
            imm: GET_CGROUP_CLASSID,
        },
        Insn {
            code: 0x95, // BPF_JMP | BPF_EXIT
            regs: 0,
            off: 0,
            imm: 0,
        },
    ];
    let license = c"GPL";
    let mut name = [0u8; 16];
    name[..NAME.len()].copy_from_slice(NAME.as_bytes());
    let attr = ProgLoad {
        prog_type: SCHED_CLS,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        prog_name: name,
    };
    // SAFETY: `attr` points at the instructions and license above, which outlive the call;
    // the kernel reads `size_of::<ProgLoad>()` bytes of it and writes nothing back.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &attr as *const ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::other(format!(
            "loading the net_cls classifier (BPF): {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
