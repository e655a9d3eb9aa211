// Stand-ins for DGX OS tools, written into each simulated node's /usr/local/bin. They print what
// the real tools print on a GB10 Spark, from the node's live state; nothing here knows it runs
// in a simulator beyond the header line of each script.
#include "sparkctl/sim/node_image.h"

namespace spark::sim {
namespace {

// Shared by the RDMA tools: RDMA device -> netdev, in `ls /sys/class/infiniband` order.
constexpr char kDevicePairs[] =
    "pairs=\"roceP2p1s0f0:enP2p1s0f0np0 roceP2p1s0f1:enP2p1s0f1np1 "
    "rocep1s0f0:enp1s0f0np0 rocep1s0f1:enp1s0f1np1\"\n";

}  // namespace

std::string RefreshScript() {
  return std::string(R"SH(#!/bin/bash
# sparksim-refresh [IB_DIR]: regenerates the emulated RDMA tree (/sys/class/infiniband) from the
# live netdev state: port state follows the link, active_mtu follows the MTU, and the GID table
# follows the addresses (0/1: fe80 EUI-64 from the MAC, then ::ffff:a.b.c.d per IPv4 address,
# then other IPv6 addresses; each as a RoCE v1 and a RoCE v2 entry). Files change only when
# their content does. Run by an `ip monitor` loop in the node, by show_gids, and by sparkctl sim.
ib=${1:-/sys/class/infiniband}
net=/sys/class/net
real=/sys/class/.net
table=16
zero=0000:0000:0000:0000:0000:0000:0000:0000
)SH") + kDevicePairs + R"SH(
# /sys/class/net: the namespace's real entries (bind-mounted at /sys/class/.net), except that
# each fabric netdev is a directory of links to its real attributes plus the mlx5 ECN knobs
# (ecn/roce_np/enable/<prio>, ecn/roce_rp/enable/<prio>) a veth lacks.
if [ -d "$real" ]; then
  fabric=" "
  for pair in $pairs; do fabric+="${pair#*:} "; done
  for e in "$real"/*; do
    d=${e##*/}
    if [[ $fabric == *" $d "* ]]; then
      if [ -L "$net/$d" ] || [ ! -d "$net/$d" ]; then rm -f "$net/$d"; mkdir -p "$net/$d"; fi
      for a in "$e"/*; do
        n=${a##*/}
        [ -e "$net/$d/$n" ] || [ -L "$net/$d/$n" ] || ln -s "$a" "$net/$d/$n"
      done
      for point in roce_np roce_rp; do
        mkdir -p "$net/$d/ecn/$point/enable"
        for p in 0 1 2 3 4 5 6 7; do
          [ -f "$net/$d/ecn/$point/enable/$p" ] || echo 0 > "$net/$d/ecn/$point/enable/$p"
        done
      done
    elif [ ! -e "$net/$d" ] && [ ! -L "$net/$d" ]; then
      ln -s "$e" "$net/$d"
    fi
  done
  for e in "$net"/*; do [ -e "$real/${e##*/}" ] || rm -rf "$e"; done
fi
put() {
  local cur=""
  [ -f "$1" ] && IFS= read -r cur < "$1"
  [ -f "$1" ] && [ "$cur" = "$2" ] || printf '%s\n' "$2" > "$1"
}
drop() { [ -e "$1" ] && rm -f "$1"; return 0; }
eui64() {
  local a b c d e f
  IFS=: read -r a b c d e f <<< "$1"
  printf -v "$2" 'fe80:0000:0000:0000:%02x%s:%sff:fe%s:%s%s' $((0x$a ^ 2)) "$b" "$c" "$d" "$e" "$f"
}
expand6() {
  local a=$1 head tail i n seg out="" h=() t=()
  if [[ $a == *::* ]]; then head=${a%%::*}; tail=${a#*::}; else head=$a; tail=""; fi
  [ -n "$head" ] && IFS=: read -ra h <<< "$head"
  [ -n "$tail" ] && IFS=: read -ra t <<< "$tail"
  n=$((8 - ${#h[@]} - ${#t[@]}))
  local parts=("${h[@]}")
  for ((i = 0; i < n; i++)); do parts+=(0); done
  parts+=("${t[@]}")
  for seg in "${parts[@]}"; do printf -v seg '%04x' "0x$seg"; out+="$seg:"; done
  printf -v "$2" '%s' "${out%:}"
}
declare -A v4 v6
while read -r _ dev fam addr _; do
  case $fam in
    inet) v4[$dev]+="${addr%/*} " ;;
    inet6) v6[$dev]+="${addr%/*} " ;;
  esac
done < <(ip -o addr show 2>/dev/null)
for pair in $pairs; do
  d=${pair%%:*}; nd=${pair#*:}; p=$ib/$d/ports/1
  [ -d "$net/$nd" ] && [ -d "$p" ] || continue
  read -r op < "$net/$nd/operstate"; read -r mtu < "$net/$nd/mtu"; read -r mac < "$net/$nd/address"
  if [ "$op" = up ]; then put "$p/state" "4: ACTIVE"; put "$p/phys_state" "5: LinkUp"
  else put "$p/state" "1: DOWN"; put "$p/phys_state" "3: Disabled"; fi
  ibmtu=256; code=1; c=1
  for m in 512 1024 2048 4096; do c=$((c + 1)); [ "$mtu" -ge $((m + 96)) ] && ibmtu=$m && code=$c; done
  put "$p/active_mtu" "$ibmtu ($code)"
  eui64 "$mac" ll
  e=("$ll|IB/RoCE v1" "$ll|RoCE v2")
  for a in ${v4[$nd]}; do
    IFS=. read -r o1 o2 o3 o4 <<< "$a"
    printf -v g '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4"
    e+=("$g|IB/RoCE v1" "$g|RoCE v2")
  done
  for a in ${v6[$nd]}; do
    expand6 "$a" g
    [ "$g" = "$ll" ] || e+=("$g|IB/RoCE v1" "$g|RoCE v2")
  done
  for ((i = 0; i < table; i++)); do
    if ((i < ${#e[@]})); then
      put "$p/gids/$i" "${e[i]%%|*}"; put "$p/gid_attrs/types/$i" "${e[i]#*|}"
      put "$p/gid_attrs/ndevs/$i" "$nd"
    else
      put "$p/gids/$i" "$zero"; drop "$p/gid_attrs/types/$i"; drop "$p/gid_attrs/ndevs/$i"
    fi
  done
done
exit 0
)SH";
}

std::string Ibdev2netdevScript() {
  return std::string(R"SH(#!/bin/bash
# ibdev2netdev stand-in (DGX OS ships it with MLNX OFED): RDMA device -> netdev and link state.
)SH") + kDevicePairs + R"SH(
for pair in $pairs; do
  d=${pair%%:*}; nd=${pair#*:}
  [ -d "/sys/class/net/$nd" ] || continue
  read -r op < "/sys/class/net/$nd/operstate"
  st=Down; [ "$op" = up ] && st=Up
  echo "$d port 1 ==> $nd ($st)"
done
)SH";
}

std::string ShowGidsScript() {
  return R"SH(#!/bin/bash
# show_gids stand-in (MLNX OFED): the RoCE GID table of every RDMA device, or of device $1.
sparksim-refresh >/dev/null 2>&1
ib=/sys/class/infiniband
printf 'DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n'
printf -- '---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n'
found=0
for dir in "$ib"/*/ports/1; do
  d=${dir#$ib/}; d=${d%%/*}
  [ -n "$1" ] && [ "$1" != "$d" ] && continue
  for t in "$dir"/gid_attrs/types/*; do
    [ -f "$t" ] || continue
    i=${t##*/}
    read -r gid < "$dir/gids/$i"; read -r type < "$t"; read -r nd < "$dir/gid_attrs/ndevs/$i"
    ver=v1; [ "$type" = "RoCE v2" ] && ver=v2
    ip4=""
    if [[ $gid == 0000:0000:0000:0000:0000:ffff:* ]]; then
      h=${gid:30:4}${gid:35:4}
      ip4="$((16#${h:0:2})).$((16#${h:2:2})).$((16#${h:4:2})).$((16#${h:6:2}))"
    fi
    printf '%s\t1\t%s\t%s\t%-16s\t%s\t%s\n' "$d" "$i" "$gid" "$ip4" "$ver" "$nd"
    found=$((found + 1))
  done
done
echo "n_gids_found=$found"
)SH";
}

std::string UpdateGrubScript() {
  return R"SH(#!/bin/bash
# update-grub stand-in: writes /boot/grub/grub.cfg like grub-mkconfig's 10_linux does, from the
# installed linux-image-* packages (the emulated dpkg database) and GRUB_DEFAULT of
# /etc/default/grub and /etc/default/grub.d/*.cfg. A simulated node boots no kernel.
set -e
db=/etc/sparksim/dpkg-status
GRUB_DEFAULT=0
[ -f /etc/default/grub ] && . /etc/default/grub
for f in /etc/default/grub.d/*.cfg; do [ -f "$f" ] && . "$f"; done
echo "Sourcing file \`/etc/default/grub'" >&2
echo "Generating grub configuration file ..." >&2
read -r id < /etc/machine-id
uuid=${id:0:8}-${id:8:4}-${id:12:4}-${id:16:4}-${id:20:12}
kernels=$(sed -n 's/^ii \tlinux-image-\([0-9][^\t]*\)\t.*/\1/p' "$db" | sort -V -r)
mkdir -p /boot/grub
{
  echo "# Generated by the simulator's update-grub from /etc/default/grub"
  echo "set default=\"${GRUB_DEFAULT}\""
  first=${kernels%%$'\n'*}
  echo "menuentry 'Ubuntu' --class ubuntu \$menuentry_id_option 'gnulinux-simple-$uuid' {"
  echo "	linux	/boot/vmlinuz-$first root=UUID=$uuid ro"
  echo "}"
  echo "submenu 'Advanced options for Ubuntu' \$menuentry_id_option 'gnulinux-advanced-$uuid' {"
  for k in $kernels; do
    echo "Found linux image: /boot/vmlinuz-$k" >&2
    echo "	menuentry 'Ubuntu, with Linux $k' --class ubuntu \$menuentry_id_option 'gnulinux-$k-advanced-$uuid' {"
    echo "		linux	/boot/vmlinuz-$k root=UUID=$uuid ro"
    echo "	}"
    echo "	menuentry 'Ubuntu, with Linux $k (recovery mode)' --class ubuntu \$menuentry_id_option 'gnulinux-$k-recovery-$uuid' {"
    echo "		linux	/boot/vmlinuz-$k root=UUID=$uuid ro recovery nomodeset"
    echo "	}"
  done
  echo "}"
} > /boot/grub/grub.cfg.new
mv /boot/grub/grub.cfg.new /boot/grub/grub.cfg
echo "done" >&2
)SH";
}

std::string DpkgQueryScript() {
  return R"SH(#!/bin/bash
# dpkg-query stand-in: `-W -f='${db:Status-Abbrev}\t${Package}\t${Depends}\n' [PATTERN...]` over
# the node's emulated dpkg database (/etc/sparksim/dpkg-status: kernel packages of DGX OS).
db=/etc/sparksim/dpkg-status
want='${db:Status-Abbrev}\t${Package}\t${Depends}\n'
[ "$1" = -W ] || { echo "dpkg-query: only -W is emulated" >&2; exit 2; }
shift
case $1 in -f=*) fmt=${1#-f=}; shift ;; -f) fmt=$2; shift 2 ;; *) fmt='' ;; esac
[ "$fmt" = "$want" ] || { echo "dpkg-query: only -f='$want' is emulated" >&2; exit 2; }
[ $# -gt 0 ] || set -- '*'
found=0
while IFS=$'\t' read -r st name deps; do
  for pat in "$@"; do
    # shellcheck disable=SC2053
    if [[ $name == $pat ]]; then printf '%s\t%s\t%s\n' "$st" "$name" "$deps"; found=1; break; fi
  done
done < "$db"
[ $found = 1 ] || { echo "dpkg-query: no packages found matching $*" >&2; exit 1; }
)SH";
}

std::string AptMarkScript() {
  return R"SH(#!/bin/bash
# apt-mark stand-in: hold, unhold, showhold over the emulated dpkg database; the holds are kept
# in /etc/sparksim/apt-holds (the node's own /etc).
db=/etc/sparksim/dpkg-status
holds=/etc/sparksim/apt-holds
touch "$holds"
cmd=$1
shift
case $cmd in
  showhold) sort -u "$holds" ;;
  hold|unhold)
    for p in "$@"; do
      if ! cut -f2 "$db" | grep -qxF -- "$p"; then
        echo "E: Unable to locate package $p" >&2; exit 100
      fi
    done
    for p in "$@"; do
      if [ "$cmd" = hold ]; then
        if grep -qxF -- "$p" "$holds"; then echo "$p was already set on hold."
        else echo "$p" >> "$holds"; echo "$p set on hold."; fi
      else
        if grep -qxF -- "$p" "$holds"; then
          grep -vxF -- "$p" "$holds" > "$holds.new" || true; mv "$holds.new" "$holds"
          echo "Canceled hold on $p."
        else echo "$p was already not on hold."; fi
      fi
    done ;;
  *) echo "apt-mark: only hold, unhold and showhold are emulated" >&2; exit 100 ;;
esac
)SH";
}

std::string DcbScript() {
  return std::string(R"SH(#!/bin/bash
# dcb stand-in (iproute2's DCB tool, as on a ConnectX-7): pfc, apptrust and app (dscp-prio) of the
# fabric netdevs; the state is kept in /etc/sparksim/dcb/<netdev>/. Other netdevs have no DCB.
)SH") + kDevicePairs + R"SH(
obj=$1 cmd=$2
[ "$3" = dev ] || { echo "Usage: dcb $obj $cmd dev DEV ..." >&2; exit 1; }
dev=$4
shift 4
fabric=" "
for pair in $pairs; do fabric+="${pair#*:} "; done
[[ $fabric == *" $dev "* ]] || { echo "Error: $dev: Operation not supported" >&2; exit 1; }
st=/etc/sparksim/dcb/$dev
mkdir -p "$st"
[ -f "$st/pfc" ] || : > "$st/pfc"            # priorities with PFC on, one per line
[ -f "$st/trust" ] || echo pcp > "$st/trust"  # the trust order
[ -f "$st/app" ] || : > "$st/app"            # dscp:prio entries
case $obj/$cmd in
  pfc/show)
    out="prio-pfc"
    for p in 0 1 2 3 4 5 6 7; do
      if grep -qx "$p" "$st/pfc"; then out+=" $p:on"; else out+=" $p:off"; fi
    done
    echo "$out" ;;
  pfc/set)
    [ "$1" = prio-pfc ] || { echo "dcb stand-in: only prio-pfc is emulated" >&2; exit 1; }
    shift
    for m in "$@"; do
      k=${m%%:*} v=${m#*:}
      if [ "$k" = all ]; then
        if [ "$v" = on ]; then printf '%s\n' 0 1 2 3 4 5 6 7 > "$st/pfc"; else : > "$st/pfc"; fi
      else
        grep -vx "$k" "$st/pfc" > "$st/pfc.new" || true
        [ "$v" = on ] && echo "$k" >> "$st/pfc.new"
        mv "$st/pfc.new" "$st/pfc"
      fi
    done ;;
  apptrust/show) echo "order: $(cat "$st/trust")" ;;
  apptrust/set)
    [ "$1" = order ] || { echo "dcb stand-in: only order is emulated" >&2; exit 1; }
    shift; echo "$*" > "$st/trust" ;;
  app/show) echo "dscp-prio $(sort -n "$st/app" | tr '\n' ' ')" ;;
  app/replace|app/add)
    [ "$1" = dscp-prio ] || { echo "dcb stand-in: only dscp-prio is emulated" >&2; exit 1; }
    shift
    for m in "$@"; do
      grep -v "^${m%%:*}:" "$st/app" > "$st/app.new" || true
      echo "$m" >> "$st/app.new"; mv "$st/app.new" "$st/app"
    done ;;
  app/flush) : > "$st/app" ;;
  *) echo "dcb stand-in: $obj $cmd is not emulated" >&2; exit 1 ;;
esac
)SH";
}

std::string UnameScript() {
  return R"SH(#!/bin/bash
# uname stand-in: the kernel release comes from /proc/sys/kernel/osrelease (the node's kernel),
# the machine from /etc/sparksim/machine when a fault set one, everything else from the real
# uname.
read -r rel < /proc/sys/kernel/osrelease
real=$(/usr/bin/uname -r)
machine=$(cat /etc/sparksim/machine 2>/dev/null)
case "$*" in
  -r | --kernel-release) echo "$rel" ;;
  -m | --machine) if [ -n "$machine" ]; then echo "$machine"; else /usr/bin/uname -m; fi ;;
  *) out=$(/usr/bin/uname "$@") || exit $?; out=${out//$real/$rel}
     [ -n "$machine" ] && out=${out//$(/usr/bin/uname -m)/$machine}
     echo "$out" ;;
esac
)SH";
}

std::string GetconfScript() {
  return R"SH(#!/bin/sh
# getconf stand-in: GNU_LIBC_VERSION from /etc/sparksim/glibc when a fault set one, everything
# else (and that, without a fault) from the real getconf.
v=$(cat /etc/sparksim/glibc 2>/dev/null)
if [ "$*" = GNU_LIBC_VERSION ] && [ -n "$v" ]; then echo "glibc $v"; exit 0; fi
exec /usr/bin/getconf "$@"
)SH";
}

std::string NvidiaSmiScript(const NodeState& node) {
  std::string uuid = "GPU-" + node.default_machine_id.substr(0, 8) + "-" +
                     node.default_machine_id.substr(8, 4) + "-" +
                     node.default_machine_id.substr(12, 4) + "-" +
                     node.default_machine_id.substr(16, 4) + "-" +
                     node.default_machine_id.substr(20, 12);
  return "#!/bin/bash\n# nvidia-smi stand-in: one NVIDIA GB10 (driver 580, CUDA 13.0).\nuuid=" +
         uuid + R"SH(
name="NVIDIA GB10"; driver=580.95.05; cuda=13.0; bus=0000000F:01:00.0; sm=2405; maxsm=3003
query=""; format=csv
for a in "$@"; do
  case "$a" in
    --query-gpu=*) query=${a#*=} ;;
    --format=*) format=${a#*=} ;;
    -L | --list-gpus) echo "GPU 0: $name (UUID: $uuid)"; exit 0 ;;
    --version) printf 'NVIDIA-SMI version  : %s\nDRIVER version      : %s\nCUDA Version        : %s\n' "$driver" "$driver" "$cuda"; exit 0 ;;
  esac
done
if [ -n "$query" ]; then
  heads=(); vals=()
  IFS=, read -ra fields <<< "$query"
  for f in "${fields[@]}"; do
    f=${f// /}
    case "$f" in
      name | gpu_name) h=name; v=$name ;;
      index) h=index; v=0 ;;
      count) h=count; v=1 ;;
      uuid | gpu_uuid) h=uuid; v=$uuid ;;
      driver_version) h=driver_version; v=$driver ;;
      pci.bus_id | gpu_bus_id) h=pci.bus_id; v=$bus ;;
      compute_cap) h=compute_cap; v=12.1 ;;
      persistence_mode) h=persistence_mode; v=Enabled ;;
      clocks.sm | clocks.current.sm) h="clocks.current.sm [MHz]"; v="$sm MHz" ;;
      clocks.max.sm | clocks.max.sm) h="clocks.max.sm [MHz]"; v="$maxsm MHz" ;;
      memory.total | memory.used | memory.free) h="$f [MiB]"; v="[N/A]" ;;
      temperature.gpu) h=temperature.gpu; v=41 ;;
      utilization.gpu) h="utilization.gpu [%]"; v="0 %" ;;
      power.draw) h="power.draw [W]"; v="4.52 W" ;;
      *) echo "Field \"$f\" is not a valid field to query." >&2; echo >&2
         echo "Run 'nvidia-smi --help-query-gpu' for a list of valid fields." >&2; exit 2 ;;
    esac
    heads+=("$h"); vals+=("$v")
  done
  [[ $format == *nounits* ]] && for i in "${!vals[@]}"; do
    v=${vals[i]}; v=${v% MHz}; v=${v% %}; v=${v% W}; vals[i]=$v; h=${heads[i]}; heads[i]=${h% \[*\]}; done
  join() { local IFS=$'\x1f'; local s="$*"; echo "${s//$'\x1f'/, }"; }
  [[ $format == *noheader* ]] || join "${heads[@]}"
  join "${vals[@]}"
  exit 0
fi
cat <<EOF
$(date '+%a %b %e %H:%M:%S %Y')
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI $driver              Driver Version: $driver      CUDA Version: $cuda     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  $name                    On  |   $bus Off |                  N/A |
| N/A   41C    P8              4W /  N/A  | Not Supported          |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
EOF
)SH";
}

}  // namespace spark::sim
