//! Linux cpuset lists (`0-3,8,10-11`), as cgroups, `reservedCPUs` and Koordinator's
//! resource-status annotations write them.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cpuset part {0:?}")]
pub struct CpusetError(pub String);

/// A cpuset list as CPU ids.
pub fn parse(content: &str) -> Result<Vec<u32>, CpusetError> {
    let num = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| CpusetError(s.to_string()))
    };
    let mut out = Vec::new();
    for part in content.trim().split(',').filter(|p| !p.trim().is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    return Err(CpusetError(part.to_string()));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// CPU ids as a cpuset list.
pub fn format(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_and_format() {
        assert_eq!(
            super::parse("0-3,8, 10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(super::parse("").unwrap(), Vec::<u32>::new());
        assert!(super::parse("3-1").is_err());
        assert!(super::parse("a").is_err());
        assert_eq!(super::format(&[3, 0, 1, 2, 8, 10, 11]), "0-3,8,10-11");
    }
}
