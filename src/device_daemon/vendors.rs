//! What each vendor's own tool says about its devices, as Koordinator's device daemon reads
//! it (`pkg/device-daemon/resource`): Huawei's `npu-smi`, Cambricon's `cnmon`, Kunlun's
//! `xpu_smi`, MetaX's `mx-smi` — model, memory, AI cores and CPUs, UUIDs, bus ids and
//! health. The parsing reads the same lines and fields as Koordinator's; where its reading
//! would fail on real output (card ids and `/dev/davinci*` minors sorted as text, an
//! upper-case bus id looked up in sysfs, a card id hard-coded to 1) koord reads it right.

use crate::api::xpu::{XpuDevice, XpuStatus, XpuTopology};

/// Runs a vendor tool with arguments and returns what it printed, or why it could not.
pub type Run<'a> = &'a dyn Fn(&str, &[&str]) -> Result<String, String>;

const GPU_MEMORY: &str = "koordinator.sh/gpu-memory";
const GPU_CORE: &str = "koordinator.sh/gpu-core";

/// The devices of `vendor` as its tool reports them; `minors` are the `/dev/davinci<N>`
/// numbers (Ascend only). An error names the tool and what it could not read.
pub fn devices(vendor: &str, run: Run, minors: &[u32]) -> Result<Vec<XpuDevice>, String> {
    match vendor {
        "huawei" => npu(run, minors),
        "cambricon" => mlu(run),
        "kunlun" => xpu(run),
        "metax" => mx(run),
        other => Err(format!("no tool known for vendor {other}")),
    }
}

/// The last whitespace-separated field of a line.
fn last(line: &str) -> &str {
    line.split_whitespace().last().unwrap_or("")
}

fn int(tool: &str, what: &str, s: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| format!("{tool}: {what}: {s:?} is not a number"))
}

/// The sum of the last field of every line containing any of `keys`.
fn sum_of(tool: &str, text: &str, keys: &[&str]) -> Result<u64, String> {
    let mut total = 0;
    for line in text.lines().filter(|l| keys.iter().any(|k| l.contains(k))) {
        total += int(tool, keys[0], last(line))?;
    }
    Ok(total)
}

fn device(vendor: &str, model: &str, uuid: String, minor: String) -> XpuDevice {
    XpuDevice {
        vendor: vendor.to_string(),
        model: model.to_string(),
        uuid,
        minor,
        status: Some(XpuStatus {
            healthy: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What a Cambricon, Kunlun or MetaX device carries: its memory and 100 cores.
fn gpu_resources(memory: String) -> std::collections::BTreeMap<String, String> {
    [(GPU_MEMORY, memory), (GPU_CORE, "100".to_string())]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn topology(bus_id: String, node_id: String) -> Option<XpuTopology> {
    Some(XpuTopology {
        socket_id: "-1".into(),
        node_id,
        bus_id,
        ..Default::default()
    })
}

fn unhealthy(d: &mut XpuDevice, code: &str, message: String) {
    d.status = Some(XpuStatus {
        healthy: false,
        err_code: code.to_string(),
        err_message: message,
    });
}

/// Huawei Ascend through `npu-smi` (Koordinator's `npuManager`).
fn npu(run: Run, minors: &[u32]) -> Result<Vec<XpuDevice>, String> {
    const T: &str = "npu-smi";
    let model = npu_model(&run(T, &["info", "-m"])?)?;
    let cards: Vec<String> = run(T, &["info", "-l"])?
        .lines()
        .filter(|l| l.contains("NPU ID"))
        .map(|l| last(l).to_string())
        .collect();
    let Some(first) = cards.first() else {
        return Ok(Vec::new());
    };
    if minors.len() < cards.len() {
        return Err(format!(
            "{T}: {} cards listed but {} /dev/davinci devices",
            cards.len(),
            minors.len()
        ));
    }
    let memory = match run(T, &["info", "-t", "memory", "-i", first]) {
        Ok(text) => sum_of(T, &text, &["DDR Capacity", "HBM Capacity"])?,
        // Older cards (310P) have no memory query; Koordinator's figure for them.
        Err(e) if e.contains("Command or option is not found") => 21527,
        Err(e) => return Err(e),
    };
    let ai_core = match model.as_str() {
        "Ascend-310P3" => 8,
        _ => sum_of(
            T,
            &run(T, &["info", "-t", "common", "-i", first])?,
            &["Aicore Count"],
        )?,
    };
    let ai_cpu = match model.as_str() {
        "Ascend-910B" => 0,
        "Ascend-910B2" => 6,
        "Ascend-910B3" | "Ascend-910B4" => 7,
        _ => sum_of(
            T,
            &run(T, &["info", "-t", "cpu-num-cfg", "-i", first])?,
            &["AI"],
        )?,
    };
    let mut out = Vec::new();
    for (card, minor) in cards.iter().zip(minors) {
        let board = run(T, &["info", "-t", "board", "-i", card])?;
        let mut d = device(
            "huawei",
            &model,
            format!("npu-{card}-{minor}"),
            minor.to_string(),
        );
        d.resources = [
            (GPU_MEMORY, format!("{memory}Mi")),
            ("huawei.com/npu-cpu", ai_cpu.to_string()),
            ("huawei.com/npu-core", ai_core.to_string()),
            ("huawei.com/npu-dvpp", "100".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let bus = board
            .lines()
            .find(|l| l.contains("PCIe Bus Info"))
            .map(last);
        d.topology = topology(bus.unwrap_or("").to_ascii_lowercase(), String::new());
        let faults = board.lines().find(|l| l.contains("Chip Fault")).map(last);
        let faults: u64 = faults.and_then(|f| f.parse().ok()).unwrap_or(0);
        if faults > 0 {
            let msg = format!("NPU index {card} has {faults} chip faults");
            unhealthy(&mut d, "chip error", msg);
        }
        out.push(d);
    }
    Ok(out)
}

/// `npu-smi info -m`: the chip name on the first data line, as `Ascend-910B3`.
fn npu_model(text: &str) -> Result<String, String> {
    let fields: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .nth(1)
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    match fields.as_slice() {
        [.., a, b] => Ok(format!("{a}-{b}")),
        _ => Err("npu-smi info -m: no chip line".into()),
    }
}

/// The `/dev/davinci<N>` numbers under `dev`, in numeric order.
pub fn davinci_minors(dev: &std::path::Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_dir(dev)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            name.to_str()?.strip_prefix("davinci")?.parse().ok()
        })
        .collect();
    out.sort_unstable();
    out
}

/// Cambricon MLU through `cnmon` (Koordinator's `mluManager`).
fn mlu(run: Run) -> Result<Vec<XpuDevice>, String> {
    const T: &str = "cnmon";
    let list = run(T, &["-l"])?;
    let count = list.lines().filter(|l| l.contains("UUID")).count();
    let model = list
        .split_whitespace()
        .find(|f| f.contains("MLU"))
        .ok_or_else(|| format!("{T} -l: no MLU model name"))?
        .to_string();
    let info = run(T, &["info"])?;
    let memory = mlu_memory(&info).ok_or_else(|| format!("{T} info: no physical memory total"))?;
    let mut out = Vec::new();
    for i in 0..count {
        let text = run(T, &["info", "-c", &i.to_string()])?;
        let mut d = mlu_card(&text, i)?;
        d.model.clone_from(&model);
        d.resources = gpu_resources(format!("{memory}Mi"));
        out.push(d);
    }
    Ok(out)
}

/// The `Total` line right after `Physical Memory Usage`: its number (MiB).
fn mlu_memory(info: &str) -> Option<String> {
    let mut lines = info.lines();
    lines.find(|l| l.contains("Physical Memory Usage"))?;
    let total = lines.next().filter(|l| l.contains("Total"))?;
    let fields: Vec<&str> = total.split_whitespace().collect();
    (fields.len() >= 2).then(|| fields[fields.len() - 2].to_string())
}

/// One card of `cnmon info -c <i>`: UUID, NUMA node, PCI address and the `Device` status.
fn mlu_card(text: &str, i: usize) -> Result<XpuDevice, String> {
    let field = |key: &str| {
        text.lines()
            .find(|l| l.contains(key))
            .map(|l| last(l).to_string())
    };
    let uuid = text
        .lines()
        .find(|l| l.contains("UUID"))
        .and_then(|l| l.split_whitespace().nth(2))
        .ok_or_else(|| format!("cnmon info -c {i}: no UUID"))?;
    let mut d = device("cambricon", "", uuid.to_string(), i.to_string());
    let (mut slot, mut health) = (None, None);
    for line in text.lines() {
        let Some(value) = line.trim().strip_prefix("Device") else {
            continue;
        };
        let Some(value) = value.trim_start().strip_prefix(':').map(str::trim) else {
            continue;
        };
        if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
            slot = Some(value.to_string());
        } else if !value.is_empty() {
            health = Some(value.to_string());
        }
    }
    match health.as_deref() {
        Some("Good") => {}
        Some(other) => unhealthy(&mut d, "", format!("Device is unhealthy, status: {other}")),
        None => unhealthy(&mut d, "", "Device status not reported".into()),
    }
    let bus = pci_address(
        &field("Domain ID").unwrap_or_default(),
        &field("Bus num").unwrap_or_default(),
        &slot.unwrap_or_default(),
        &field("Function").unwrap_or_default(),
    );
    d.topology = topology(bus, field("NUMA node id").unwrap_or_default());
    Ok(d)
}

/// `domain:bus:device.function` in sysfs's spelling when each part is hexadecimal.
fn pci_address(domain: &str, bus: &str, slot: &str, function: &str) -> String {
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    match (hex(domain), hex(bus), hex(slot), hex(function)) {
        (Some(d), Some(b), Some(s), Some(f)) => format!("{d:04x}:{b:02x}:{s:02x}.{f:x}"),
        _ => format!("{domain}:{bus}:{slot}.{function}"),
    }
}

/// Kunlun XPU through `xpu_smi -m` (Koordinator's `xpuManager`): one line per device,
/// the model in field 22 and the memory (MiB) in field 19 of the first.
fn xpu(run: Run) -> Result<Vec<XpuDevice>, String> {
    const T: &str = "xpu_smi";
    let text = run(T, &["-m"])?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let Some(first) = lines.first() else {
        return Ok(Vec::new());
    };
    let fields: Vec<&str> = first.split_whitespace().collect();
    if fields.len() < 22 {
        return Err(format!(
            "{T} -m: {} fields, the model is field 22",
            fields.len()
        ));
    }
    let (memory, model) = (fields[18], fields[21]);
    let mut out = Vec::new();
    for i in 0..lines.len() {
        let one = run(T, &["-m", "-d", &format!("/dev/xpu{i}")])?;
        let bus = one
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut d = device("kunlun", model, format!("xpu-{i}"), i.to_string());
        d.resources = gpu_resources(format!("{memory}Mi"));
        d.topology = topology(bus, String::new());
        out.push(d);
    }
    Ok(out)
}

/// The fourth field of each line containing `key` (any case), as Koordinator's awk.
fn fourth_fields<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    let key = key.to_ascii_lowercase();
    text.lines()
        .filter(|l| l.to_ascii_lowercase().contains(&key))
        .filter_map(|l| l.split_whitespace().nth(3))
        .collect()
}

/// MetaX through `mx-smi` (Koordinator's `mxManager`).
fn mx(run: Run) -> Result<Vec<XpuDevice>, String> {
    const T: &str = "mx-smi";
    let hw = run(T, &["--show-hwinfo"])?;
    let models = fourth_fields(&hw, "Model Name");
    let Some(model) = models.first() else {
        return Ok(Vec::new());
    };
    let memory = fourth_fields(&hw, "Memory Capacity")
        .first()
        .map(|m| m.replace("GB", "Gi"))
        .ok_or_else(|| format!("{T} --show-hwinfo: no memory capacity"))?;
    let list = run(T, &["--list"])?;
    let mut out = Vec::new();
    for i in 0..models.len() {
        let tag = format!("GPU#{i}");
        let names_gpu = |l: &&str| {
            !l.contains("SGPU") && l.split_whitespace().any(|f| f.trim_end_matches(':') == tag)
        };
        let uuid = list
            .lines()
            .find(names_gpu)
            .and_then(|l| l.split_whitespace().nth(5));
        let uuid = uuid.unwrap_or("").trim_matches(|c| c == '(' || c == ')');
        let one = run(T, &["--show-hwinfo", "-i", &i.to_string()])?;
        let bus = one
            .lines()
            .filter(|l| !l.contains("SGPU") && l.to_ascii_lowercase().contains("gpu#"))
            .find_map(|l| l.split_whitespace().nth(2))
            .unwrap_or("");
        let mut d = device("metax", model, uuid.to_string(), i.to_string());
        d.resources = gpu_resources(memory.clone());
        d.topology = topology(bus.to_ascii_lowercase(), String::new());
        // A device whose ECC counters cannot be read is reported healthy, as Koordinator.
        if let Ok(ecc) = run(T, &["--count-ecc", "-i", &i.to_string()]) {
            let keys = ["SRAM Uncorrectable", "DRAM Uncorrectable", "Double Bit ECC"];
            let errors = sum_of(T, &ecc, &keys).unwrap_or(0);
            if errors > 0 {
                let msg = format!(
                    "MX index {i} has {errors} SRAM/DRAM Uncorrectable or Double Bit ECC errors"
                );
                unhealthy(&mut d, "ECC error", msg);
            }
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
#[path = "vendors_tests.rs"]
mod tests;
