use super::*;
use std::collections::BTreeMap;

/// A tool that answers each known command line with a canned text and fails the rest as
/// npu-smi does.
fn canned(answers: &[(&str, &str)]) -> impl Fn(&str, &[&str]) -> Result<String, String> + use<> {
    let map: BTreeMap<String, String> = answers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |tool, args| {
        let line = format!("{tool} {}", args.join(" "));
        map.get(&line)
            .cloned()
            .ok_or_else(|| format!("{line}: exit status: 255: Command or option is not found"))
    }
}

const NPU_M: &str = "        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name
        1                              0                              0                              Ascend 910B3
        1                              1                              -                              Mcu
        2                              0                              1                              Ascend 910B3
        2                              1                              -                              Mcu
";

const NPU_L: &str = "        Total Count                    : 2

        NPU ID                         : 1
        Product Name                   : IT21PDDA01
        Chip Count                     : 1

        NPU ID                         : 2
        Product Name                   : IT21PDDA01
        Chip Count                     : 1
";

const NPU_MEMORY: &str = "        NPU ID                         : 1
        DDR Capacity(MB)               : 0
        HBM Capacity(MB)               : 65536
        HBM Clock Speed(MHz)           : 1600
";

fn npu_board(bus: &str, faults: u32) -> String {
    format!(
        "        NPU ID                         : 1
        Software Version               : 23.0.rc3
        PCIe Bus Info                  : {bus}
        Chip Fault                     : {faults}
"
    )
}

#[test]
fn npu_devices_from_npu_smi() {
    let b1 = npu_board("0000:C1:00.0", 0);
    let b2 = npu_board("0000:01:00.0", 2);
    let run = canned(&[
        ("npu-smi info -m", NPU_M),
        ("npu-smi info -l", NPU_L),
        ("npu-smi info -t memory -i 1", NPU_MEMORY),
        ("npu-smi info -t common -i 1", "        Aicore Count : 20\n"),
        ("npu-smi info -t board -i 1", &b1),
        ("npu-smi info -t board -i 2", &b2),
    ]);
    // Minors beyond 9 sort as numbers: card 1 ↔ davinci2, card 2 ↔ davinci10.
    let got = devices("huawei", &run, &[2, 10]).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].model, "Ascend-910B3");
    assert_eq!(got[0].uuid, "npu-1-2");
    assert_eq!(got[1].uuid, "npu-2-10");
    assert_eq!(got[1].minor, "10");
    let r = &got[0].resources;
    assert_eq!(r["koordinator.sh/gpu-memory"], "65536Mi");
    assert_eq!(r["huawei.com/npu-core"], "20");
    assert_eq!(
        r["huawei.com/npu-cpu"], "7",
        "910B3's AI CPUs from the model"
    );
    assert_eq!(r["huawei.com/npu-dvpp"], "100");
    let t = got[0].topology.as_ref().unwrap();
    assert_eq!(
        (t.bus_id.as_str(), t.socket_id.as_str()),
        ("0000:c1:00.0", "-1")
    );
    assert!(got[0].status.as_ref().unwrap().healthy);
    let s = got[1].status.as_ref().unwrap();
    assert!(!s.healthy);
    assert_eq!(s.err_code, "chip error");
    assert_eq!(s.err_message, "NPU index 2 has 2 chip faults");
}

#[test]
fn npu_310p_without_memory_query_and_ai_cpus_from_the_card() {
    let m = "NPU ID Chip ID Chip Logic ID Chip Name\n0 0 0 Ascend 310P3\n";
    let l = "Total Count : 1\n\nNPU ID : 0\n";
    let cpu =
        "        Current AI CPU number          : 3\n        Current control CPU number     : 1\n";
    let board = npu_board("0000:3b:00.0", 0);
    let run = canned(&[
        ("npu-smi info -m", m),
        ("npu-smi info -l", l),
        ("npu-smi info -t cpu-num-cfg -i 0", cpu),
        ("npu-smi info -t board -i 0", &board),
    ]);
    let got = devices("huawei", &run, &[0]).unwrap();
    let r = &got[0].resources;
    assert_eq!(r["koordinator.sh/gpu-memory"], "21527Mi");
    assert_eq!(r["huawei.com/npu-core"], "8");
    assert_eq!(r["huawei.com/npu-cpu"], "3");
}

#[test]
fn npu_errors_name_the_tool_and_what_is_missing() {
    let run = canned(&[
        ("npu-smi info -m", "NPU ID Chip ID\n"),
        ("npu-smi info -l", NPU_L),
    ]);
    let e = devices("huawei", &run, &[0, 1]).unwrap_err();
    assert!(e.contains("npu-smi info -m"), "{e}");
    let run = canned(&[("npu-smi info -m", NPU_M), ("npu-smi info -l", NPU_L)]);
    let e = devices("huawei", &run, &[0]).unwrap_err();
    assert_eq!(e, "npu-smi: 2 cards listed but 1 /dev/davinci devices");
    let bad = "HBM Capacity(MB) : lots\n";
    let run = canned(&[
        ("npu-smi info -m", NPU_M),
        ("npu-smi info -l", NPU_L),
        ("npu-smi info -t memory -i 1", bad),
    ]);
    let e = devices("huawei", &run, &[0, 1]).unwrap_err();
    assert!(e.contains("\"lots\" is not a number"), "{e}");
}

#[test]
fn davinci_minors_read_from_dev() {
    let dir = tempfile::tempdir().unwrap();
    for n in [
        "davinci10",
        "davinci2",
        "davinci_manager",
        "davinci0",
        "null",
    ] {
        std::fs::write(dir.path().join(n), "").unwrap();
    }
    assert_eq!(davinci_minors(dir.path()), [0, 2, 10]);
    assert!(davinci_minors(std::path::Path::new("/nonexistent")).is_empty());
}

const CNMON_L: &str = "Card 0: MLU370-X8  (UUID: 6A3F2C1D0E4B)
Card 1: MLU370-X8  (UUID: 7B402D2E1F5C)
";

const CNMON_INFO: &str = "Card 0
Product Name                   : MLU370-X8
Physical Memory Usage          :
       Total                   : 24576 MiB
       Used                    : 1020 MiB
Virtual Memory Usage           :
       Total                   : 1048576 MiB
";

fn cnmon_card(uuid: &str, bus: &str, health: &str) -> String {
    format!(
        "Card {uuid}
UUID           : {uuid}
PCIe Info      :
    Domain ID  : 0
    Bus num    : {bus}
    Device     : 0
    Function   : 0
NUMA node id   : 1
Device         : {health}
"
    )
}

#[test]
fn mlu_devices_from_cnmon() {
    let c0 = cnmon_card("6A3F2C1D0E4B", "1a", "Good");
    let c1 = cnmon_card("7B402D2E1F5C", "3d", "Bad");
    let run = canned(&[
        ("cnmon -l", CNMON_L),
        ("cnmon info", CNMON_INFO),
        ("cnmon info -c 0", &c0),
        ("cnmon info -c 1", &c1),
    ]);
    let got = devices("cambricon", &run, &[]).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].model.as_str(), got[0].uuid.as_str()),
        ("MLU370-X8", "6A3F2C1D0E4B")
    );
    assert_eq!(got[0].resources["koordinator.sh/gpu-memory"], "24576Mi");
    assert_eq!(got[0].resources["koordinator.sh/gpu-core"], "100");
    let t = got[0].topology.as_ref().unwrap();
    assert_eq!(
        (t.bus_id.as_str(), t.node_id.as_str()),
        ("0000:1a:00.0", "1")
    );
    assert!(got[0].status.as_ref().unwrap().healthy);
    let s = got[1].status.as_ref().unwrap();
    assert!(!s.healthy);
    assert_eq!(s.err_message, "Device is unhealthy, status: Bad");
    assert_eq!(got[1].minor, "1");
}

fn xpu_line(bus: &str) -> String {
    // xpu_smi -m: 22 or more fields; memory (MiB) is field 19, the model field 22.
    let mut f: Vec<String> = (0..24).map(|i| format!("f{i}")).collect();
    f[0] = bus.to_string();
    f[18] = "32768".into();
    f[21] = "R200".into();
    f.join(" ")
}

#[test]
fn xpu_devices_from_xpu_smi() {
    let all = format!(
        "{}\n{}\n",
        xpu_line("0000:03:00.0"),
        xpu_line("0000:83:00.0")
    );
    let d0 = xpu_line("0000:03:00.0");
    let d1 = xpu_line("0000:83:00.0");
    let run = canned(&[
        ("xpu_smi -m", &all),
        ("xpu_smi -m -d /dev/xpu0", &d0),
        ("xpu_smi -m -d /dev/xpu1", &d1),
    ]);
    let got = devices("kunlun", &run, &[]).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[1].uuid.as_str(), got[1].model.as_str()),
        ("xpu-1", "R200")
    );
    assert_eq!(got[1].resources["koordinator.sh/gpu-memory"], "32768Mi");
    assert_eq!(got[1].topology.as_ref().unwrap().bus_id, "0000:83:00.0");
    let short = canned(&[("xpu_smi -m", "0000:03:00.0 0 1 2\n")]);
    let e = devices("kunlun", &short, &[]).unwrap_err();
    assert_eq!(e, "xpu_smi -m: 4 fields, the model is field 22");
}

const MX_HW: &str = "mx-smi  version: 2.1.6
GPU#0  MXC500  0000:0f:00.0
    Model Name        : MXC500
    Memory Capacity   : 64GB
GPU#1  MXC500  0000:34:00.0
    Model Name        : MXC500
    Memory Capacity   : 64GB
";

const MX_LIST: &str = "mx-smi  version: 2.1.6
GPU#0 MXC500 0000:0f:00.0 Board 0 (GPU-3c1e9b2a-0000)
GPU#1 MXC500 0000:34:00.0 Board 1 (GPU-8d2f0c3b-0001)
SGPU#1 MXC500 0000:34:00.0 Board 1 (SGPU-ffff)
";

#[test]
fn mx_devices_from_mx_smi() {
    let ecc_bad = "SRAM Uncorrectable : 1\nDRAM Uncorrectable : 2\nDouble Bit ECC : 0\n";
    let run = canned(&[
        ("mx-smi --show-hwinfo", MX_HW),
        ("mx-smi --list", MX_LIST),
        ("mx-smi --show-hwinfo -i 0", "GPU#0  MXC500  0000:0f:00.0\n"),
        ("mx-smi --show-hwinfo -i 1", "GPU#1  MXC500  0000:34:00.0\n"),
        ("mx-smi --count-ecc -i 1", ecc_bad),
    ]);
    let got = devices("metax", &run, &[]).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(
        (got[0].model.as_str(), got[0].uuid.as_str()),
        ("MXC500", "GPU-3c1e9b2a-0000")
    );
    assert_eq!(
        got[1].uuid, "GPU-8d2f0c3b-0001",
        "the SGPU line is not the GPU"
    );
    assert_eq!(got[0].resources["koordinator.sh/gpu-memory"], "64Gi");
    assert_eq!(got[1].topology.as_ref().unwrap().bus_id, "0000:34:00.0");
    assert!(
        got[0].status.as_ref().unwrap().healthy,
        "ECC unreadable: healthy"
    );
    let s = got[1].status.as_ref().unwrap();
    assert_eq!((s.healthy, s.err_code.as_str()), (false, "ECC error"));
    assert_eq!(
        s.err_message,
        "MX index 1 has 3 SRAM/DRAM Uncorrectable or Double Bit ECC errors"
    );
}

#[test]
fn pci_addresses_in_sysfs_spelling() {
    assert_eq!(pci_address("0", "1a", "0", "0"), "0000:1a:00.0");
    assert_eq!(pci_address("0x0", "0xB1", "1", "2"), "0000:b1:01.2");
    assert_eq!(pci_address("x", "1a", "0", "0"), "x:1a:0.0");
}
