//! A cgroup's memory per NUMA node from `memory.numa_stat`, as Koordinator's readers parse
//! it: cgroup v1's first line `total=<pages> N0=<pages> ...` in pages; cgroup v2's `anon`
//! and `file` lines in bytes, counted in whole 4 KiB pages.

use std::collections::BTreeMap;

use super::{CgroupDir, CgroupError, Cgroups, Resource, Version};

/// NUMA node → pages, from a v1 `memory.numa_stat`.
pub fn parse_v1(text: &str) -> Option<BTreeMap<u32, u64>> {
    let mut fields = text.lines().next()?.split_whitespace();
    fields.next().filter(|f| f.starts_with("total"))?;
    let mut out = BTreeMap::new();
    for f in fields {
        let (node, pages) = f.split_once('=')?;
        out.insert(node.strip_prefix('N')?.parse().ok()?, pages.parse().ok()?);
    }
    (!out.is_empty()).then_some(out)
}

/// NUMA node → 4 KiB pages of `anon` plus `file`, from a v2 `memory.numa_stat`.
pub fn parse_v2(text: &str) -> Option<BTreeMap<u32, u64>> {
    let mut lines = text.lines();
    let mut out: BTreeMap<u32, u64> = BTreeMap::new();
    for prefix in ["anon", "file"] {
        let mut fields = lines.next()?.split_whitespace();
        fields.next().filter(|f| *f == prefix)?;
        for f in fields {
            let (node, bytes) = f.split_once('=')?;
            let node: u32 = node.strip_prefix('N')?.parse().ok()?;
            *out.entry(node).or_default() += bytes.parse::<u64>().ok()? / 4096;
        }
    }
    (!out.is_empty()).then_some(out)
}

impl Cgroups {
    /// The cgroup's memory in bytes per NUMA node.
    pub fn numa_memory(&self, dir: &CgroupDir) -> Result<BTreeMap<u32, f64>, CgroupError> {
        let parse = match self.version() {
            Version::V1 => parse_v1,
            Version::V2 => parse_v2,
        };
        let pages = self.read_with(Resource::MemoryNumaStat, dir, parse)?;
        let size = crate::os::selfstat::page_size();
        let pages = pages.ok_or_else(|| CgroupError::Parse {
            path: self.file(Resource::MemoryNumaStat, dir),
            content: "no total= (v1) or anon/file (v2) lines per NUMA node".into(),
        })?;
        Ok(pages
            .into_iter()
            .map(|(n, p)| (n, (p * size) as f64))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn koordinators_parse_memory_numa_stat() {
        let v1 = "total=7 N0=5 N1=2\nfile=1 N0=1 N1=0\nanon=6 N0=4 N1=2\n";
        assert_eq!(parse_v1(v1), Some(BTreeMap::from([(0, 5), (1, 2)])));
        assert_eq!(parse_v1("file=1 N0=1\n"), None, "not a total line first");
        assert_eq!(parse_v1("total=1 Nx=1\n"), None);
        let v2 = "anon N0=8192 N1=4096\nfile N0=4096 N1=0\nkernel_stack N0=1\n";
        assert_eq!(parse_v2(v2), Some(BTreeMap::from([(0, 3), (1, 1)])));
        assert_eq!(parse_v2("file N0=1\nanon N0=1\n"), None, "anon comes first");
    }
}
