/*
 * A stand-in for bindfltapi.dll, for the Windows node under Wine
 * (integration/winenode): BfSetupFilter, BfRemoveMapping and
 * BfGetMappings with their signatures, answering as Windows answers the
 * callers winproc and containerd.exe use (go-winio pkg/bindfilter
 * ApplyFileBinding, RemoveFileBinding, GetBindMappings; hcsshim
 * internal/jobobject ApplyFileBinding, which internal/jobcontainers
 * storage.go setupRootfsBinding and mounts.go setupMounts call). The
 * contract tests are bindfilter_test.go and testdata/bindfltcontract.
 *
 * What it answers, and where that is written:
 *  - A mapping makes the virtualization root show the target: a
 *    directory, a volume (the layer stand-in's, vmcompute.c, resolved to
 *    its directory; a volume root is given with its trailing separator,
 *    go-winio ApplyFileBinding's comment) or a file (hcsshim mounts.go
 *    setupMounts binds each OCI mount's source, files included, with the
 *    source unchanged: the kubelet's termination log is one, named through
 *    its volume's GUID, which Wine opens by the prefix's dosdevices names
 *    the node makes, node.go nameVolumes). The target
 *    is resolved as the file system opens it (a symbolic link to what it
 *    names: go-winio bind_filter_test.go TestGetBindMappingsSymlinks); a
 *    file named with a trailing separator is not found.
 *  - The root need not exist; its parent must (go-winio and hcsshim
 *    ApplyFileBinding make the parent first: "The parent directory needs
 *    to exist for the bind to work"), else ERROR_PATH_NOT_FOUND.
 *  - What is at the root is shadowed, not refused, and shows again once
 *    the mapping goes (hcsshim mounts.go setupMounts: "The default
 *    behavior for bindflt is to shadow the directory").
 *  - A second target at a mapped root, with BINDFLT_FLAG_NO_MULTIPLE_TARGETS
 *    on either mapping, is ERROR_INVALID_PARAMETER (go-winio bind_filter.go:
 *    "fail mapping with STATUS_INVALID_PARAMETER if a mapping produces
 *    multiple targets"; TestEnsureOnlyOneTargetCanBeMounted).
 *  - Removing a root without a mapping is ERROR_INVALID_PARAMETER
 *    (microsoft/go-winio#274; containerd core/mount/mount_windows.go
 *    Unmount tolerates it, as well as ERROR_NOT_FOUND).
 *  - BfGetMappings with BINDFLT_GET_MAPPINGS_FLAG_VOLUME lists the mappings
 *    whose roots are on the volume of the path given, in the layout
 *    go-winio GetBindMappings reads: a header {size, status, count}, an
 *    entry per mapping {root length, root offset, flags, target count,
 *    targets offset}, an entry per target {length, offset}, then the
 *    names, UTF-16 without terminators, lengths in bytes.
 *  - Mappings do not survive a reboot (they live in the driver): the node
 *    simulates one by deleting the boot file (BOOT_FILE); the next call
 *    into the stand-in, from any process, drops every mapping made before
 *    it (the deepest roots first, as one under another's root is reached
 *    through it), so each root shows what it shadowed.
 *
 * How: a mapping is a Linux symbolic link at the root, which Wine follows
 * (Wine gives Windows code no link a Linux program sees, standin.h); what
 * it shadows is moved aside under the state directory (or beside the root
 * when that is another volume) and moved back when the mapping goes. The
 * mappings are files under C:\ProgramData\winproc-standins\mappings, so
 * every process sees them.
 *
 * It leaves unproven what only the driver does: read-only mappings
 * (BINDFLT_FLAG_READ_ONLY_MAPPING is recorded and listed, not enforced),
 * merged targets without NO_MULTIPLE_TARGETS (E_NOTIMPL: a link shows one
 * target), mappings scoped to a job or a silo and exception paths
 * (E_NOTIMPL), the exact HRESULT the driver gives where Wine's file
 * system answers instead (a missing target or parent), the NT device
 * names Windows lists in BfGetMappings (this lists DOS paths, which
 * go-winio's getFinalPath opens alike: Wine opens no \\.\GLOBALROOT path),
 * and that a mapping is seen at
 * once by every process (a reboot is seen at the next call).
 */
#include "standin.h"
#include <stdlib.h>

#define BINDFLT_FLAG_NO_MULTIPLE_TARGETS 0x40
#define BINDFLT_GET_MAPPINGS_FLAG_VOLUME 0x1
#define BOOT_FILE STANDIN_STATE L"\\bindflt-boot"
#define E_INVALID_PARAMETER HRESULT_FROM_WIN32(ERROR_INVALID_PARAMETER)
#define RECORD_MAX (2 * MAX_PATH + 32)

/* A mapping as its state file keeps it. */
struct mapping {
    int shadowed; /* 0: nothing was at the root; 1: moved aside */
    unsigned long flags;
    WCHAR root[MAX_PATH], target[MAX_PATH];
};

static BOOL read_mapping(const WCHAR *state, struct mapping *m)
{
    WCHAR rec[RECORD_MAX], *tab1, *tab2, *tab3;
    if (!standin_read(state, rec, RECORD_MAX))
        return FALSE;
    tab1 = wcschr(rec, L'\t');
    tab2 = tab1 ? wcschr(tab1 + 1, L'\t') : NULL;
    tab3 = tab2 ? wcschr(tab2 + 1, L'\t') : NULL;
    if (!tab3)
        return FALSE;
    *tab1 = *tab2 = *tab3 = 0;
    m->shadowed = rec[0] == L'1';
    m->flags = wcstoul(tab1 + 1, NULL, 10);
    wcsncpy(m->root, tab2 + 1, MAX_PATH - 1);
    m->root[MAX_PATH - 1] = 0;
    wcsncpy(m->target, tab3 + 1, MAX_PATH - 1);
    m->target[MAX_PATH - 1] = 0;
    return TRUE;
}

static HRESULT write_mapping(const WCHAR *state, const struct mapping *m)
{
    WCHAR rec[RECORD_MAX];
    swprintf(rec, RECORD_MAX, L"%d\t%lu\t%ls\t%ls", m->shadowed, m->flags, m->root, m->target);
    return standin_write(state, rec);
}

/* clean drops trailing separators, so a root has one name. */
static void clean(const WCHAR *p, WCHAR *out)
{
    size_t n;
    wcsncpy(out, p, MAX_PATH - 1);
    out[MAX_PATH - 1] = 0;
    n = wcslen(out);
    while (n > 3 && out[n - 1] == L'\\')
        out[--n] = 0;
}

/* shadow_places are where what a root shadows is kept: under the state
 * directory, or beside the root when that is another volume. */
static void shadow_places(const WCHAR *root, WCHAR *state_place, WCHAR *beside)
{
    standin_state_file(L"shadowed", root, state_place, MAX_PATH);
    swprintf(beside, MAX_PATH, L"%ls.bindflt-shadowed", root);
}

static BOOL shadow(const WCHAR *root)
{
    WCHAR a[MAX_PATH], b[MAX_PATH];
    shadow_places(root, a, b);
    return MoveFileExW(root, a, 0) || MoveFileExW(root, b, 0);
}

static void unshadow(const WCHAR *root)
{
    WCHAR a[MAX_PATH], b[MAX_PATH];
    shadow_places(root, a, b);
    if (!MoveFileExW(a, root, 0))
        MoveFileExW(b, root, 0);
}

/* drop undoes a mapping: the link goes, what it shadowed comes back. */
static HRESULT drop(const WCHAR *state, const struct mapping *m)
{
    char *ur = standin_unix(m->root);
    long rc = ur ? standin_linux2(LINUX_UNLINK, ur, NULL) : -1;
    HeapFree(GetProcessHeap(), 0, ur);
    if (rc != 0 && rc != -2 /* ENOENT */)
        return HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED);
    if (m->shadowed)
        unshadow(m->root);
    DeleteFileW(state);
    return S_OK;
}

/* for_each_mapping calls fn with each mapping's state file and record. */
static void for_each_mapping(void (*fn)(const WCHAR *, const struct mapping *, void *), void *arg)
{
    WCHAR pattern[MAX_PATH], state[MAX_PATH];
    WIN32_FIND_DATAW fd;
    struct mapping m;
    HANDLE find;
    swprintf(pattern, MAX_PATH, L"%ls\\mappings\\{*", STANDIN_STATE);
    find = FindFirstFileW(pattern, &fd);
    if (find == INVALID_HANDLE_VALUE)
        return;
    do {
        swprintf(state, MAX_PATH, L"%ls\\mappings\\%ls", STANDIN_STATE, fd.cFileName);
        if (read_mapping(state, &m))
            fn(state, &m, arg);
    } while (FindNextFileW(find, &fd));
    FindClose(find);
}

/* A listing gathers the mappings on one volume (all with no volume). */
struct listing {
    WCHAR volume[MAX_PATH];
    struct mapping *m;
    ULONG n, cap;
};

static void list_one(const WCHAR *state, const struct mapping *m, void *arg)
{
    struct listing *l = arg;
    WCHAR volume[MAX_PATH];
    struct mapping *grown;
    (void)state;
    if (l->volume[0] && (!GetVolumePathNameW(m->root, volume, MAX_PATH) || _wcsicmp(volume, l->volume)))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        grown = l->m ? HeapReAlloc(GetProcessHeap(), 0, l->m, l->cap * sizeof *grown)
                     : HeapAlloc(GetProcessHeap(), 0, l->cap * sizeof *grown);
        if (!grown)
            return;
        l->m = grown;
    }
    l->m[l->n++] = *m;
}

static int deepest_first(const void *a, const void *b)
{
    return (int)wcslen(((const struct mapping *)b)->root) - (int)wcslen(((const struct mapping *)a)->root);
}

/* boot drops the mappings of a boot before the last: the node deletes
 * BOOT_FILE to simulate a reboot. A mapping under another's root (a
 * mount under a container's rootfs) is reached through it, so the
 * deepest go first. */
static void boot(void)
{
    struct listing l = {{0}};
    WCHAR state[MAX_PATH];
    ULONG i;
    if (GetFileAttributesW(BOOT_FILE) != INVALID_FILE_ATTRIBUTES)
        return;
    for_each_mapping(list_one, &l);
    qsort(l.m, l.n, sizeof *l.m, deepest_first);
    for (i = 0; i < l.n; i++) {
        standin_state_file(L"mappings", l.m[i].root, state, MAX_PATH);
        drop(state, &l.m[i]);
    }
    HeapFree(GetProcessHeap(), 0, l.m);
    CreateDirectoryW(STANDIN_STATE, NULL);
    standin_write(BOOT_FILE, L"booted");
}

/* resolve is the path a target names as the file system opens it: a
 * layer stand-in volume's directory, symbolic links followed. */
static HRESULT resolve(const WCHAR *target, WCHAR *out)
{
    WCHAR path[MAX_PATH], name[MAX_PATH], state[MAX_PATH], *close;
    BY_HANDLE_FILE_INFORMATION info;
    size_t n = wcslen(target);
    HANDLE h;
    DWORD got;
    wcsncpy(path, target, MAX_PATH - 1);
    path[MAX_PATH - 1] = 0;
    close = wcsncmp(target, L"\\\\?\\Volume{", 11) ? NULL : wcschr(target, L'}');
    if (close && close[1] == L'\\') {
        wcsncpy(name, target, close - target + 2);
        name[close - target + 2] = 0;
        standin_state_file(L"volumes", name, state, MAX_PATH);
        if (standin_read(state, path, MAX_PATH) && wcslen(path) + wcslen(close + 2) + 2 < MAX_PATH) {
            if (close[2])
                wcscat(wcscat(path, L"\\"), close + 2);
        }
    }
    h = CreateFileW(path, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL, OPEN_EXISTING,
                    FILE_FLAG_BACKUP_SEMANTICS, NULL);
    if (h == INVALID_HANDLE_VALUE)
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    if (!GetFileInformationByHandle(h, &info) ||
        (n && target[n - 1] == L'\\' && !(info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY))) {
        CloseHandle(h);
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    }
    got = GetFinalPathNameByHandleW(h, out, MAX_PATH, VOLUME_NAME_DOS);
    CloseHandle(h);
    if (!got || got >= MAX_PATH)
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    if (!wcsncmp(out, L"\\\\?\\", 4) && out[5] == L':')
        memmove(out, out + 4, (wcslen(out) - 3) * sizeof(WCHAR));
    return S_OK;
}

/* parent_exists: the root's parent directory is there. */
static BOOL parent_exists(const WCHAR *root)
{
    WCHAR parent[MAX_PATH], *sep;
    DWORD attrs;
    wcscpy(parent, root);
    sep = wcsrchr(parent, L'\\');
    if (!sep)
        return FALSE;
    sep[sep - parent == 2 ? 1 : 0] = 0;
    attrs = GetFileAttributesW(parent);
    return attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY);
}

HRESULT WINAPI BfSetupFilter(HANDLE job, ULONG flags, const WCHAR *root, const WCHAR *target,
                             const WCHAR *const *exceptions, ULONG exception_count)
{
    WCHAR state[MAX_PATH];
    struct mapping m = {0}, old;
    char *ur, *ut;
    HRESULT hr;
    long rc;
    (void)exceptions;
    if (job || exception_count)
        return E_NOTIMPL;
    boot();
    clean(root, m.root);
    m.flags = flags;
    standin_state_file(L"mappings", m.root, state, MAX_PATH);
    if (read_mapping(state, &old))
        return ((old.flags | flags) & BINDFLT_FLAG_NO_MULTIPLE_TARGETS) ? E_INVALID_PARAMETER : E_NOTIMPL;
    if (FAILED(hr = resolve(target, m.target)))
        return hr;
    if (!parent_exists(m.root))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    if (GetFileAttributesW(m.root) != INVALID_FILE_ATTRIBUTES) {
        if (!shadow(m.root))
            return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
        m.shadowed = 1;
    }
    ur = standin_unix(m.root);
    ut = standin_unix(m.target);
    rc = (ur && ut) ? standin_linux2(LINUX_SYMLINK, ut, ur) : -1;
    HeapFree(GetProcessHeap(), 0, ur);
    HeapFree(GetProcessHeap(), 0, ut);
    if (rc != 0) {
        if (m.shadowed)
            unshadow(m.root);
        return HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED);
    }
    return write_mapping(state, &m);
}

HRESULT WINAPI BfRemoveMapping(HANDLE job, const WCHAR *root)
{
    WCHAR r[MAX_PATH], state[MAX_PATH];
    struct mapping m;
    if (job)
        return E_NOTIMPL;
    boot();
    clean(root, r);
    standin_state_file(L"mappings", r, state, MAX_PATH);
    if (!read_mapping(state, &m))
        return E_INVALID_PARAMETER;
    return drop(state, &m);
}

/* put_name writes a name at *at (bytes from buf) and its length and
 * offset at entry. */
static void put_name(BYTE *buf, ULONG *at, ULONG *entry, const WCHAR *name)
{
    ULONG len = (ULONG)(wcslen(name) * sizeof(WCHAR));
    memcpy(buf + *at, name, len);
    entry[0] = len;
    entry[1] = *at;
    *at += len;
}

HRESULT WINAPI BfGetMappings(ULONG flags, HANDLE job, const WCHAR *path, void *sid, ULONG *size, void *out)
{
    struct listing l = {{0}};
    ULONG need, at, i, *header = out, *entry, *target;
    BYTE *buf = out;
    if (flags != BINDFLT_GET_MAPPINGS_FLAG_VOLUME || job || sid)
        return E_NOTIMPL;
    if (!path || !size)
        return E_INVALID_PARAMETER;
    boot();
    if (!GetVolumePathNameW(path, l.volume, MAX_PATH))
        return HRESULT_FROM_WIN32(GetLastError());
    for_each_mapping(list_one, &l);
    need = 12 + l.n * (20 + 8);
    for (i = 0; i < l.n; i++)
        need += (ULONG)((wcslen(l.m[i].root) + wcslen(l.m[i].target)) * sizeof(WCHAR));
    if (*size < need || !out) {
        *size = need;
        HeapFree(GetProcessHeap(), 0, l.m);
        return HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER);
    }
    header[0] = need;
    header[1] = 0;
    header[2] = l.n;
    at = 12 + l.n * 28;
    for (i = 0; i < l.n; i++) {
        entry = (ULONG *)(buf + 12 + i * 20);
        target = (ULONG *)(buf + 12 + l.n * 20 + i * 8);
        put_name(buf, &at, entry, l.m[i].root);
        entry[2] = l.m[i].flags;
        entry[3] = 1;
        entry[4] = (ULONG)((BYTE *)target - buf);
        put_name(buf, &at, target, l.m[i].target);
    }
    *size = need;
    HeapFree(GetProcessHeap(), 0, l.m);
    return S_OK;
}
