#!/usr/bin/env python3
"""Builds the rig's guest image in OUT from the Debian kernel .deb already downloaded there:
OUT/vmlinux (the ELF kernel, pulled out of vmlinuz's xz payload: boots without a bootloader) and
OUT/initrd.cpio.gz (busybox, the rig's init, and the closure of the named kernel modules).

usage: build-image.py OUT INIT_SCRIPT MODULE...
"""
import glob, gzip, os, shutil, subprocess, sys

out, init_script, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
deb = glob.glob(os.path.join(out, "*.deb"))
if len(deb) != 1:
    sys.exit(f"expected one kernel .deb in {out}, found {deb}")
pkg = os.path.join(out, "pkg")
subprocess.run(["dpkg-deb", "-x", deb[0], pkg], check=True)

# vmlinux: decompress the xz stream embedded in the bzImage.
vmlinuz = glob.glob(os.path.join(pkg, "boot", "vmlinuz-*"))[0]
data = open(vmlinuz, "rb").read()
at = data.find(b"\xfd7zXZ\x00")
if at < 0:
    sys.exit(f"no xz payload in {vmlinuz}")
xz = subprocess.run(["xz", "-dc", "--single-stream"], input=data[at:], capture_output=True)
if not xz.stdout.startswith(b"\x7fELF"):
    sys.exit(f"xz payload of {vmlinuz} is not an ELF kernel: {xz.stderr.decode()}")
open(os.path.join(out, "vmlinux"), "wb").write(xz.stdout)

# Module closure, dependencies first, from each .ko's modinfo "depends=" (no depmod needed).
index = {}
for path in glob.glob(os.path.join(pkg, "lib", "modules", "*", "**", "*.ko"), recursive=True):
    index[os.path.basename(path)[:-3].replace("-", "_")] = path

def depends(name):
    blob = open(index[name], "rb").read()
    i = blob.find(b"depends=")
    if i < 0:
        return []
    return [d.replace("-", "_") for d in blob[i + 8 : blob.index(b"\0", i)].decode().split(",") if d]

order = []
def visit(name):
    if name in order:
        return
    if name not in index:
        sys.exit(f"kernel module {name} is not in {deb[0]} (built in? check the kernel config)")
    for d in depends(name):
        visit(d)
    order.append(name)
for m in wanted:
    visit(m)

root = os.path.join(out, "initramfs")
for d in ["bin", "modules", "proc", "sys", "dev", "host", "tmp"]:
    os.makedirs(os.path.join(root, d), exist_ok=True)
shutil.copy("/bin/busybox", os.path.join(root, "bin", "busybox"))
shutil.copy(init_script, os.path.join(root, "init"))
os.chmod(os.path.join(root, "init"), 0o755)
for m in order:
    shutil.copy(index[m], os.path.join(root, "modules", m + ".ko"))
open(os.path.join(root, "modules", "order"), "w").write("\n".join(order) + "\n")

files = subprocess.run(["find", "."], cwd=root, capture_output=True, check=True).stdout
cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=root, input=files, capture_output=True, check=True).stdout
with gzip.open(os.path.join(out, "initrd.cpio.gz"), "wb", compresslevel=1) as f:
    f.write(cpio)
shutil.rmtree(root)
print(f"rig: image: kernel {os.path.basename(vmlinuz)}, {len(order)} modules, initrd {len(cpio) >> 10} KiB", file=sys.stderr)
