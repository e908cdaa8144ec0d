# Sourced by the bench scripts: sets bwrap_cmd, bubblewrap mxc-like:
# everything unshared, /usr and /etc read-only, fresh /proc, /dev and /tmp.
# The top-level /bin, /lib* and /sbin follow this host: a symlink (merged
# /usr, as on Debian 12) is recreated, a directory is bound read-only.
# Append the command to run.
bwrap_cmd=(bwrap --unshare-all --die-with-parent --new-session
  --ro-bind /usr /usr --ro-bind /etc /etc)
for d in /bin /sbin /lib /lib32 /lib64 /libx32; do
  if [ -L "$d" ]; then
    bwrap_cmd+=(--symlink "$(readlink "$d")" "$d")
  elif [ -d "$d" ]; then
    bwrap_cmd+=(--ro-bind "$d" "$d")
  fi
done
bwrap_cmd+=(--proc /proc --dev /dev --tmpfs /tmp)
