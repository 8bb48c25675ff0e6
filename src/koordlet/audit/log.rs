//! The audit log on disk, as Koordinator keeps it: JSON lines appended to `audit.log`,
//! which at 2 MiB is renamed `audit-<local time>-<n>.log`; the oldest renamed files go so
//! that at most `maxDiskSpaceMB` / 2 MiB files remain. Read newest first.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file is rotated at this size (`MaxFileSize`).
pub const MAX_FILE_SIZE: u64 = 1 << 21;
const CURRENT: &str = "audit.log";

pub struct Writer {
    dir: PathBuf,
    max_files: usize,
    file: Option<(File, u64)>,
}

impl Writer {
    pub fn new(dir: PathBuf, max_disk_space_mb: u64) -> Writer {
        let max_files = ((max_disk_space_mb << 20) / MAX_FILE_SIZE).max(1) as usize;
        Writer {
            dir,
            max_files,
            file: None,
        }
    }

    /// Appends one line, rotating when the file reaches [`MAX_FILE_SIZE`].
    pub fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(self.open()?);
        }
        let (file, size) = self.file.as_mut().expect("opened above");
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        file.write_all(&buf)?;
        *size += buf.len() as u64;
        if *size >= MAX_FILE_SIZE {
            self.file = None;
            self.rotate()?;
        }
        Ok(())
    }

    fn open(&self) -> std::io::Result<(File, u64)> {
        std::fs::create_dir_all(&self.dir)?;
        let f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(self.dir.join(CURRENT))?;
        let size = f.metadata()?.len();
        Ok((f, size))
    }

    fn rotate(&self) -> std::io::Result<()> {
        let stamp = k8s_openapi::jiff::Zoned::now().strftime("%Y-%m-%d-%H-%M-%S");
        let mut target = self.dir.join(format!("audit-{stamp}-0.log"));
        for i in 1..=8 {
            if !target.exists() {
                break;
            }
            target = self.dir.join(format!("audit-{stamp}-{i}.log"));
        }
        std::fs::rename(self.dir.join(CURRENT), target)?;
        let rotated = rotated(&self.dir);
        let excess = (rotated.len() + 1).saturating_sub(self.max_files);
        for old in rotated.iter().take(excess) {
            if let Err(e) = std::fs::remove_file(old) {
                tracing::warn!(file = %old.display(), error = %e, "old audit file not removed");
            }
        }
        Ok(())
    }
}

/// The renamed files, oldest first (their names sort by time).
fn rotated(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap_or_default().to_string_lossy();
            n.starts_with("audit-") && n.ends_with(".log")
        })
        .collect();
    files.sort();
    files
}

/// Lines of the log newest first, one file in memory at a time (at most 2 MiB).
pub struct ReverseLines {
    files: Vec<PathBuf>,
    lines: Vec<String>,
}

impl ReverseLines {
    /// The log as it is now: `audit.log`, then the renamed files newest first.
    pub fn open(dir: &Path) -> ReverseLines {
        let mut files = rotated(dir);
        files.push(dir.join(CURRENT));
        let mut r = ReverseLines {
            files,
            lines: Vec::new(),
        };
        r.load_next();
        r
    }

    fn load_next(&mut self) -> bool {
        let Some(f) = self.files.pop() else {
            return false;
        };
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        self.lines = text.lines().map(str::to_string).collect();
        true
    }
}

impl Iterator for ReverseLines {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        loop {
            if let Some(l) = self.lines.pop() {
                return Some(l);
            }
            if !self.load_next() {
                return None;
            }
        }
    }
}
