//! Partition-table editors (`fdisk`, `sfdisk`, `cfdisk`, `gdisk`, `sgdisk`, `cgdisk`,
//! `parted`): which of their invocations only read.
//!
//! Rewriting a partition table loses every file system on the disk as surely as
//! `mkfs` does, so the blocklist refuses these programs — except in the spellings that
//! only print (`fdisk -l`, `sfdisk --dump`, `sgdisk --print`, `parted -l`,
//! `parted /dev/sda print`), which agents use to look at disks. Anything not
//! recognised as read-only is refused, interactive use included (a here-document or a
//! pipe can feed an interactive editor its commands).

/// Whether `program` (a base name) with `args` edits a partition table, as far as
/// can be told: `true` for every invocation not known to be read-only.
pub(crate) fn edits_partitions(program: &str, args: &[&str]) -> bool {
    match program {
        "fdisk" | "gdisk" => {
            !any(args, &["-l", "--list", "--list-details"]) && !informational(args)
        }
        "cfdisk" | "cgdisk" => !informational(args),
        "sfdisk" => sfdisk_writes(args),
        "sgdisk" => sgdisk_writes(args),
        "parted" => parted_writes(args),
        _ => false,
    }
}

/// `--help` / `--version` alone.
fn informational(args: &[&str]) -> bool {
    !args.is_empty()
        && args
            .iter()
            .all(|a| matches!(*a, "-h" | "--help" | "-V" | "--version" | "-v"))
}

fn any(args: &[&str], options: &[&str]) -> bool {
    args.iter().any(|a| options.contains(a))
}

fn sfdisk_writes(args: &[&str]) -> bool {
    const READS: &[&str] = &[
        "-l",
        "--list",
        "-d",
        "--dump",
        "-J",
        "--json",
        "-s",
        "--show-size",
        "-g",
        "--show-geometry",
        "-V",
        "--verify",
        "-F",
        "--list-free",
        "--list-types",
        "-T",
        "-h",
        "--help",
        "-v",
        "--version",
    ];
    const WRITES: &[&str] = &[
        "--delete",
        "-A",
        "--activate",
        "--part-type",
        "--part-uuid",
        "--part-label",
        "--part-attrs",
        "-r",
        "--reorder",
        "--relocate",
        "--move-data",
        "-N",
        "--partno",
        "-a",
        "--append",
        "--backup",
        "-b",
    ];
    !any(args, READS)
        || args.iter().any(|a| {
            WRITES.contains(a)
                || WRITES
                    .iter()
                    .any(|w| w.starts_with("--") && a.starts_with(&format!("{w}=")))
        })
}

fn sgdisk_writes(args: &[&str]) -> bool {
    const READS: &[&str] = &[
        "-p",
        "--print",
        "-i",
        "--info",
        "-v",
        "--verify",
        "-O",
        "--print-mbr",
        "-L",
        "--list-types",
        "-?",
        "--help",
        "-V",
        "--version",
        "--usage",
    ];
    // `--pretend` keeps every change in memory.
    if any(args, &["-P", "--pretend"]) {
        return false;
    }
    let options: Vec<&str> = args
        .iter()
        .filter(|a| a.starts_with('-') && a.len() > 1)
        .map(|a| a.split_once('=').map_or(*a, |(o, _)| o))
        .collect();
    options.is_empty() || options.iter().any(|o| !READS.contains(o))
}

fn parted_writes(args: &[&str]) -> bool {
    const READ_COMMANDS: &[&str] = &["print", "p", "help", "version", "align-check", "quit"];
    const WRITE_COMMANDS: &[&str] = &[
        "mklabel",
        "mktable",
        "mkpart",
        "mkpartfs",
        "mkfs",
        "rm",
        "resize",
        "resizepart",
        "move",
        "cp",
        "name",
        "set",
        "toggle",
        "disk_set",
        "disk_toggle",
        "rescue",
        "type",
    ];
    if any(args, &["-l", "--list"]) || informational(args) {
        return false;
    }
    let words: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.starts_with('-'))
        .collect();
    // The device, then commands.
    let commands = words.get(1..).unwrap_or(&[]);
    let reads = commands.iter().any(|c| READ_COMMANDS.contains(c));
    !reads || commands.iter().any(|c| WRITE_COMMANDS.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_printing_spellings_pass() {
        for line in [
            "fdisk -l",
            "fdisk -l /dev/sda",
            "fdisk --list",
            "fdisk --version",
            "gdisk -l /dev/sda",
            "sfdisk -l /dev/sda",
            "sfdisk --dump /dev/sda",
            "sfdisk -J /dev/nvme0n1",
            "sgdisk -p /dev/sda",
            "sgdisk --print /dev/sda",
            "sgdisk -i 1 /dev/sda",
            "sgdisk -P -Z /dev/sda",
            "parted -l",
            "parted --list",
            "parted /dev/sda print",
            "parted -s /dev/sda unit MiB print",
            "parted -m /dev/sda print free",
            "cfdisk --help",
        ] {
            let words: Vec<&str> = line.split(' ').collect();
            assert!(!edits_partitions(words[0], &words[1..]), "{line}");
        }
        for line in [
            "fdisk /dev/sda",
            "fdisk",
            "gdisk /dev/sda",
            "cfdisk /dev/sda",
            "cfdisk",
            "cgdisk /dev/sda",
            "sfdisk /dev/sda",
            "sfdisk --delete /dev/sda 1",
            "sfdisk -d /dev/sda --delete",
            "sfdisk --part-type /dev/sda 1 83",
            "sfdisk -l --relocate=gpt-bak-std /dev/sda",
            "sgdisk -Z /dev/sda",
            "sgdisk --zap-all /dev/sda",
            "sgdisk -o /dev/sda",
            "sgdisk -n 1:0:+1G /dev/sda",
            "sgdisk --new=1:0:0 /dev/sda",
            "sgdisk -p -d 1 /dev/sda",
            "sgdisk /dev/sda",
            "parted /dev/sda",
            "parted -s /dev/sda mklabel gpt",
            "parted /dev/sda rm 1",
            "parted /dev/sda print rm 1",
            "parted -s /dev/sda mkpart primary ext4 1MiB 100%",
        ] {
            let words: Vec<&str> = line.split(' ').collect();
            assert!(edits_partitions(words[0], &words[1..]), "{line}");
        }
    }
}
