//! The node's local storage as Koordinator's koordlet sees it
//! (`pkg/koordlet/util/storageinfo.go`): disks and partitions from `lsblk`, LVM volume
//! groups from `vgs`, logical volumes from `lvs`, mount points from `findmnt`. blkio QoS
//! resolves a block named in a NodeSLO (a device, a volume group, a pod's volume) to the
//! `major:minor` of the disk under it with these maps.

use std::collections::BTreeMap;
use std::process::Command;

/// Koordinator's `LocalStorageInfo`, field for field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalStorageInfo {
    /// disk → number: `/dev/vda` → `253:0`.
    pub disk_number: BTreeMap<String, String>,
    /// number → disk: `253:0` → `/dev/vda`.
    pub number_disk: BTreeMap<String, String>,
    /// partition → its disk: `/dev/vdb3` → `/dev/vdb`.
    pub partition_disk: BTreeMap<String, String>,
    /// volume group → its disk (groups on one physical volume only).
    pub vg_disk: BTreeMap<String, String>,
    /// logical volume's mapper device → its volume group.
    pub lv_mapper_vg: BTreeMap<String, String>,
    /// mount point → its source device.
    pub mount_point_disk: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StorageError {
    #[error("fail to exec {program}: {reason}")]
    Exec { program: String, reason: String },
    #[error("output of {program} is not correct: {line:?}")]
    Output { program: &'static str, line: String },
}

impl LocalStorageInfo {
    /// Runs the four commands, as Koordinator's `GetLocalStorageInfo`. A node without LVM
    /// tools (`vgs`/`lvs` not installed) has no volume groups rather than no storage
    /// information: Koordinator fails the whole scan there, which leaves blkio QoS without
    /// even its plain devices.
    pub fn scan() -> Result<Self, StorageError> {
        let mut s = Self::default();
        s.scan_devices_output(&run("lsblk", &["-P", "-o", "NAME,TYPE,MAJ:MIN"])?)?;
        for (program, columns) in [
            ("vgs", "vg_name,pv_count,pv_name"),
            ("lvs", "lv_name,vg_name"),
        ] {
            let args = ["--readonly", "--noheadings", "--options", columns];
            match run(program, &args) {
                Ok(out) if program == "vgs" => s.scan_volume_groups_output(&out)?,
                Ok(out) => s.scan_logical_volumes_output(&out)?,
                Err(StorageError::Exec { reason, .. }) if reason.contains("not found") => {}
                Err(e) => return Err(e),
            }
        }
        s.scan_mount_point_output(&run("findmnt", &["-P", "-o", "TARGET,SOURCE"])?)?;
        Ok(s)
    }

    /// `lsblk -P -o NAME,TYPE,MAJ:MIN`: disks, and partitions mapped to the disk whose
    /// number is the partition's with the minor rounded down to a multiple of 16.
    pub fn scan_devices_output(&mut self, output: &str) -> Result<(), StorageError> {
        let mut parts = Vec::new();
        for line in lines(output) {
            let pairs = key_values(line);
            let [(_, name), (_, kind), (_, number)] = pairs.as_slice() else {
                return Err(bad("lsblk", line));
            };
            match *kind {
                "disk" => {
                    let disk = format!("/dev/{name}");
                    self.disk_number.insert(disk.clone(), number.to_string());
                    self.number_disk.insert(number.to_string(), disk);
                }
                "part" => parts.push((format!("/dev/{name}"), disk_number_of(number))),
                _ => {}
            }
        }
        // lsblk lists a disk before its partitions; taking disks first does not rely on it.
        for (part, number) in parts {
            let disk = number
                .and_then(|n| self.number_disk.get(&n).cloned())
                .unwrap_or_default();
            self.partition_disk.insert(part, disk);
        }
        Ok(())
    }

    /// `vgs --noheadings -o vg_name,pv_count,pv_name`: groups on a single physical volume
    /// (a disk or a partition of one); others are skipped, as Koordinator does.
    pub fn scan_volume_groups_output(&mut self, output: &str) -> Result<(), StorageError> {
        for line in lines(output) {
            let [vg, count, pv] = line.split_whitespace().collect::<Vec<_>>()[..] else {
                return Err(bad("vgs", line));
            };
            if count != "1" {
                tracing::warn!(
                    line,
                    "now we only support pv_count == 1, skipping a volume group"
                );
                continue;
            }
            let disk = if self.disk_number.contains_key(pv) {
                pv.to_string()
            } else {
                self.partition_disk.get(pv).cloned().unwrap_or_default()
            };
            self.vg_disk.insert(vg.to_string(), disk);
        }
        Ok(())
    }

    /// `lvs --noheadings -o lv_name,vg_name`: each volume's device-mapper name
    /// (`/dev/mapper/<vg>-<lv>`, dashes inside the names doubled).
    pub fn scan_logical_volumes_output(&mut self, output: &str) -> Result<(), StorageError> {
        for line in lines(output) {
            let [lv, vg] = line.split_whitespace().collect::<Vec<_>>()[..] else {
                return Err(bad("lvs", line));
            };
            let mapper = format!(
                "/dev/mapper/{}-{}",
                vg.replace('-', "--"),
                lv.replace('-', "--")
            );
            self.lv_mapper_vg.insert(mapper, vg.to_string());
        }
        Ok(())
    }

    /// `findmnt -P -o TARGET,SOURCE`.
    pub fn scan_mount_point_output(&mut self, output: &str) -> Result<(), StorageError> {
        for line in lines(output) {
            let [(_, target), (_, source)] = key_values(line)[..] else {
                return Err(bad("findmnt", line));
            };
            self.mount_point_disk
                .insert(target.to_string(), source.to_string());
        }
        Ok(())
    }

    /// The disk a device is or is a partition of (`getDiskByDevice`).
    pub fn disk_of_device(&self, device: &str) -> Option<&str> {
        if let Some((disk, _)) = self.disk_number.get_key_value(device) {
            return Some(disk);
        }
        self.partition_disk.get(device).map(String::as_str)
    }

    /// The disk under a volume group (`getDiskByVG`).
    pub fn disk_of_volume_group(&self, vg: &str) -> Option<&str> {
        self.vg_disk.get(vg).map(String::as_str)
    }

    /// The disk under a mount point: its source is a disk, a partition or a logical volume
    /// (`getDiskByMountPoint`).
    pub fn disk_of_mount_point(&self, mount_point: &str) -> Option<&str> {
        let device = self.mount_point_disk.get(mount_point)?;
        if let Some(disk) = self.disk_of_device(device) {
            return Some(disk);
        }
        let vg = self.lv_mapper_vg.get(device)?;
        self.disk_of_volume_group(vg)
    }

    /// A disk's `major:minor` (`getDiskNumber`).
    pub fn number(&self, disk: &str) -> Option<&str> {
        self.disk_number.get(disk).map(String::as_str)
    }
}

fn run(program: &str, args: &[&str]) -> Result<String, StorageError> {
    let exec = |reason: String| StorageError::Exec {
        program: program.to_string(),
        reason,
    };
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            // Go's words, which Koordinator's log shows.
            std::io::ErrorKind::NotFound => exec("executable file not found in $PATH".into()),
            _ => exec(e.to_string()),
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(exec(format!("{}: {}", out.status, stderr.trim())));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn lines(output: &str) -> impl Iterator<Item = &str> {
    output.lines().map(str::trim).filter(|l| !l.is_empty())
}

fn bad(program: &'static str, line: &str) -> StorageError {
    StorageError::Output {
        program,
        line: line.to_string(),
    }
}

/// `KEY="value"` pairs of a `-P` (pairs) output line, in order. Keys are upper-case letters
/// and colons (`MAJ:MIN`); a value runs to the next quote.
fn key_values(line: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(eq) = rest.find("=\"") {
        let key_start = rest[..eq]
            .rfind(|c: char| !(c.is_ascii_uppercase() || c == ':'))
            .map_or(0, |i| i + 1);
        let key = &rest[key_start..eq];
        let value_start = eq + 2;
        let Some(len) = rest[value_start..].find('"') else {
            break;
        };
        if !key.is_empty() {
            out.push((key, &rest[value_start..value_start + len]));
        }
        rest = &rest[value_start + len + 1..];
    }
    out
}

/// The disk's number for a partition's: the minor rounded down to a multiple of 16
/// (`getDiskNumberFromDeviceNumber`); `None` for text that is not `major:minor`.
fn disk_number_of(number: &str) -> Option<String> {
    let (major, minor) = number.split_once(':')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(major) || !all_digits(minor) {
        return None;
    }
    let minor: u64 = minor.parse().ok()?;
    Some(format!("{major}:{}", minor - minor % 16))
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
