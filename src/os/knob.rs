//! Kernel interface files koord reads and writes by path: cgroup files, resctrl groups
//! (`schemata`, `tasks`), `/proc/<pid>/oom_score_adj`, `/sys/block/*/dev`, device nodes and
//! the cgroup directories perf events attach to. Callers pass rooted paths (`Host`,
//! `Cgroups`), so tests point them at temp-dir trees; every error names the path.

use std::cell::RefCell;
use std::fs::File;
use std::path::Path;

use super::files::FileError;

fn at(path: &Path) -> impl FnOnce(std::io::Error) -> FileError + '_ {
    move |e| FileError::Io(path.to_path_buf(), e)
}

/// Hands `f` the text of a kernel file read into this thread's buffer. The koordlet
/// reads a few hundred cgroup and proc files a second, nearly all a line long:
/// `read_to_string` on a file whose size the kernel reports as 0 grows its buffer by
/// reallocation, and on glibc each allocation past 1 KiB sweeps the allocator's fast bins
/// (`malloc_consolidate`), scattering the next pass's small allocations over fresh pages.
/// The buffer is the thread's, zeroed once and grown as a longer file (`/proc/stat` with
/// its interrupt counters) needs, up to `KEEP`; a longer file is read into the heap.
pub fn with_small_file<R>(path: &Path, f: impl FnOnce(&str) -> R) -> std::io::Result<R> {
    thread_local! {
        static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; SMALL]);
    }
    let mut file = File::open(path)?;
    BUF.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => read_into(&mut file, &mut buf, f),
        // `f` reads another file itself: that read gets a buffer of its own.
        Err(_) => read_into(&mut file, &mut vec![0; SMALL], f),
    })
}

const SMALL: usize = 4096;
/// The most a thread's buffer keeps between reads.
const KEEP: usize = 64 * 1024;

fn read_into<R>(
    file: &mut File,
    buf: &mut Vec<u8>,
    f: impl FnOnce(&str) -> R,
) -> std::io::Result<R> {
    use std::io::Read;
    let mut len = 0;
    loop {
        if len == buf.len() {
            if buf.len() >= KEEP {
                let mut rest = Vec::from(&buf[..]);
                file.read_to_end(&mut rest)?;
                let text = String::from_utf8(rest).map_err(std::io::Error::other)?;
                return Ok(f(&text));
            }
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let text = std::str::from_utf8(&buf[..len]).map_err(std::io::Error::other)?;
    Ok(f(text))
}

/// A small kernel file's text (`with_small_file`).
pub fn read_small(path: &Path) -> std::io::Result<String> {
    with_small_file(path, str::to_string)
}

/// The whole file.
pub fn read(path: &Path) -> Result<String, FileError> {
    read_small(path).map_err(at(path))
}

/// The file, `None` when it cannot be read (absent knob, unsupported kernel).
pub fn read_opt(path: &Path) -> Option<String> {
    read_small(path).ok()
}

/// One write of `value` (kernel files take a value per write).
pub fn write(path: &Path, value: &str) -> Result<(), FileError> {
    std::fs::write(path, value).map_err(at(path))
}

/// Whether a failed write found no such file (a knob this kernel lacks, a cgroup gone).
pub fn missing(e: &FileError) -> bool {
    matches!(e, FileError::Io(_, io) if io.kind() == std::io::ErrorKind::NotFound)
}

/// Creates a directory in a kernel filesystem (a resctrl group), parents included.
pub fn ensure_dir(path: &Path) -> Result<(), FileError> {
    std::fs::create_dir_all(path).map_err(at(path))
}

/// Opens a directory, e.g. a cgroup for `perf_event_open`'s cgroup mode.
pub fn open_dir(path: &Path) -> Result<File, FileError> {
    File::open(path).map_err(at(path))
}

/// The names in a directory, sorted; empty when it cannot be read.
pub fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// The device number (`st_rdev`) of a character device node.
pub fn char_device(path: &Path) -> Result<u64, FileError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).map_err(at(path))?;
    if !meta.file_type().is_char_device() {
        return Err(FileError::Io(
            path.to_path_buf(),
            std::io::Error::other("not a character device"),
        ));
    }
    Ok(meta.rdev())
}

/// The owner uid of `path`.
pub fn owner(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("cpu.shares");
        write(&f, "1024").unwrap();
        assert_eq!(read(&f).unwrap(), "1024");
        let e = read(&d.path().join("nope")).unwrap_err();
        assert!(missing(&e) && e.to_string().contains("nope"), "{e}");
        ensure_dir(&d.path().join("BE/x")).unwrap();
        assert_eq!(names(d.path()), ["BE", "cpu.shares"]);
        assert!(char_device(&f).is_err());
        assert!(char_device(Path::new("/dev/null")).is_ok());
    }

    #[test]
    fn small_files_are_read_into_the_threads_buffer_and_big_ones_whole() {
        let d = tempfile::tempdir().unwrap();
        let (small, big, exact) = (d.path().join("s"), d.path().join("b"), d.path().join("e"));
        std::fs::write(&small, "usage 42\n").unwrap();
        let text: String = (0..2000).map(|i| format!("{i}\n")).collect();
        std::fs::write(&big, &text).unwrap();
        assert_eq!(with_small_file(&small, |s| s.trim().len()).unwrap(), 8);
        // The reused buffer holds a longer file's bytes past this one's end: unseen.
        std::fs::write(&exact, "x".repeat(4096)).unwrap();
        std::fs::write(d.path().join("t"), "1\n").unwrap();
        assert_eq!(read_small(&exact).unwrap().len(), 4096);
        assert_eq!(read_small(&d.path().join("t")).unwrap(), "1\n");
        // A reader that reads another file while it holds the thread's buffer.
        let nested = with_small_file(&small, |outer| {
            let inner = read_small(&d.path().join("t")).unwrap();
            format!("{}|{}", outer.trim(), inner.trim())
        });
        assert_eq!(nested.unwrap(), "usage 42|1");
        assert_eq!(read_small(&big).unwrap(), text, "past 4 KiB: read whole");
        assert_eq!(read_small(&exact).unwrap().len(), 4096);
        std::fs::write(&small, [0xff, 0xfe]).unwrap();
        assert!(read_small(&small).is_err(), "not UTF-8");
        assert!(read_small(&d.path().join("nope")).is_err());
        let stat = read_small(Path::new("/proc/self/stat")).unwrap();
        assert!(stat.starts_with(&std::process::id().to_string()), "{stat}");
    }
}
