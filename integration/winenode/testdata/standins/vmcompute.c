/*
 * A stand-in for vmcompute.dll's layer functions, for the Windows node
 * under Wine (integration/winenode) and the snapshotter's layer driver
 * (snapshotter, TestLayerDriverUnderWine): what hcsshim's ActivateLayer,
 * PrepareLayer, GetLayerMountPath, UnprepareLayer, DeactivateLayer,
 * DestroyLayer, ExpandSandboxSize and NameToGuid call (and HNSCall, at
 * the end, for the kubelet's /stats/summary), with their
 * signatures and their contract as hcsshim relies on it: a layer is
 * activated, then prepared over its parents (nearest first), then has a
 * volume, \\?\Volume{GUID}\, until it is unprepared and deactivated; each
 * step out of order fails with ERROR_INVALID_STATE. Windows does not
 * document the code of an out-of-order step; what matters to a caller is
 * that it is not ERROR_NOT_READY or ERROR_DEVICE_NOT_CONNECTED, the
 * transient codes that hcsshim (internal/layers/wcow_mount.go) and
 * winproc (shim/scratch) retry a layer mount on: a retried PrepareLayer
 * of a layer never activated would hide the caller's mistake.
 *
 * DestroyLayer removes the layer's directory; a link in it is removed, not
 * what it points to (Windows removes a reparse point, not its target; in
 * Wine a link is a Linux symbolic link). It refuses an activated layer
 * with ERROR_SHARING_VIOLATION (0x80070020), and a layer holding a file
 * standin-denied with E_ACCESSDENIED (0x80070005): the two refusals users
 * meet, made on request.
 *
 * The volume is a directory, <layer>\standin-volume, holding the parents'
 * Files\ copied in (nearest first, a file present is kept): what a
 * container reads through it is what the image holds, and what it writes
 * stays in its scratch. The bind filter stand-in (bindfltapi.c) resolves
 * the volume's name to that directory.
 *
 * It leaves unproven what only Windows does: the copy-on-write filter
 * (wcifs) and its whiteouts and reparse points, the scratch's VHD and its
 * size (ExpandSandboxSize records the size, below), the volume as a
 * device, and the layer service's own errors and timing: why Windows
 * refuses a destroy (an open handle, an ACL; here only the marker and the
 * activation decide), and the refused rename of an activated layer's
 * directory, which Wine does not refuse.
 *
 * ExpandSandboxSize grows the layer's sandbox.vhdx: the VHD must be
 * there (hcsshim's internal/wclayer ExpandScratchSize calls it on a
 * scratch made from blank.vhdx, then grows the volume through virtdisk,
 * which Wine lacks), and the size asked for is recorded in
 * <layer>\standin-size (bytes, as UTF-16 text like every state file of
 * the stand-ins) for a test to read; the VHD file
 * itself is not grown.
 */
#include "standin.h"

typedef struct {
    int Flavour;
    const WCHAR *HomeDir;
} DRIVER_INFO;

typedef struct {
    GUID LayerId;
    UINT32 Flags;
    const WCHAR *Path;
} WC_LAYER_DESCRIPTOR;

#define E_BAD_STATE HRESULT_FROM_WIN32(ERROR_INVALID_STATE)

static void layer_path(const DRIVER_INFO *info, const WCHAR *id, WCHAR *out)
{
    if (info && info->HomeDir && info->HomeDir[0])
        swprintf(out, MAX_PATH, L"%ls\\%ls", info->HomeDir, id);
    else
        swprintf(out, MAX_PATH, L"%ls", id);
}

static BOOL is_dir(const WCHAR *p)
{
    DWORD a = GetFileAttributesW(p);
    return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}

static BOOL exists(const WCHAR *p) { return GetFileAttributesW(p) != INVALID_FILE_ATTRIBUTES; }

/* marker is <layer>\standin-<what>: the layer's state the service keeps. */
static void marker(const WCHAR *layer, const WCHAR *what, WCHAR *out)
{
    swprintf(out, MAX_PATH, L"%ls\\standin-%ls", layer, what);
}

static HRESULT set_marker(const WCHAR *layer, const WCHAR *what)
{
    WCHAR m[MAX_PATH];
    marker(layer, what, m);
    return standin_write(m, what);
}

static BOOL has_marker(const WCHAR *layer, const WCHAR *what)
{
    WCHAR m[MAX_PATH];
    marker(layer, what, m);
    return exists(m);
}

static void clear_marker(const WCHAR *layer, const WCHAR *what)
{
    WCHAR m[MAX_PATH];
    marker(layer, what, m);
    DeleteFileW(m);
}

/* copy_tree copies src into dst, keeping what dst has. */
static HRESULT copy_tree(const WCHAR *src, const WCHAR *dst)
{
    WCHAR pattern[MAX_PATH], s[MAX_PATH], d[MAX_PATH];
    WIN32_FIND_DATAW fd;
    HANDLE h;
    HRESULT hr = S_OK;
    if (!CreateDirectoryW(dst, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
        return HRESULT_FROM_WIN32(GetLastError());
    swprintf(pattern, MAX_PATH, L"%ls\\*", src);
    h = FindFirstFileW(pattern, &fd);
    if (h == INVALID_HANDLE_VALUE)
        return S_OK;
    do {
        if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L".."))
            continue;
        swprintf(s, MAX_PATH, L"%ls\\%ls", src, fd.cFileName);
        swprintf(d, MAX_PATH, L"%ls\\%ls", dst, fd.cFileName);
        if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)
            hr = copy_tree(s, d);
        else if (!exists(d) && !CopyFileW(s, d, TRUE))
            hr = HRESULT_FROM_WIN32(GetLastError());
    } while (SUCCEEDED(hr) && FindNextFileW(h, &fd));
    FindClose(h);
    return hr;
}

/* volume_name is the layer's volume, \\?\Volume{GUID}\. */
static void volume_name(const WCHAR *layer, WCHAR *out)
{
    GUID g = standin_guid(layer);
    swprintf(out, MAX_PATH, L"\\\\?\\Volume{%08lX-%04hX-%04hX-%02X%02X-%02X%02X%02X%02X%02X%02X}\\",
             g.Data1, g.Data2, g.Data3, g.Data4[0], g.Data4[1], g.Data4[2], g.Data4[3],
             g.Data4[4], g.Data4[5], g.Data4[6], g.Data4[7]);
}

HRESULT WINAPI ActivateLayer(const DRIVER_INFO *info, const WCHAR *id)
{
    WCHAR layer[MAX_PATH];
    layer_path(info, id, layer);
    if (!is_dir(layer))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    return set_marker(layer, L"active");
}

HRESULT WINAPI PrepareLayer(const DRIVER_INFO *info, const WCHAR *id, const WC_LAYER_DESCRIPTOR *parents, UINT32 count)
{
    WCHAR layer[MAX_PATH], volume[MAX_PATH], files[MAX_PATH], name[MAX_PATH], state[MAX_PATH];
    HRESULT hr;
    UINT32 i;
    layer_path(info, id, layer);
    if (!has_marker(layer, L"active"))
        return E_BAD_STATE;
    swprintf(volume, MAX_PATH, L"%ls\\standin-volume", layer);
    if (!CreateDirectoryW(volume, NULL) && GetLastError() != ERROR_ALREADY_EXISTS)
        return HRESULT_FROM_WIN32(GetLastError());
    for (i = 0; i < count; i++) {
        swprintf(files, MAX_PATH, L"%ls\\Files", parents[i].Path);
        if (!is_dir(parents[i].Path))
            return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
        if (is_dir(files) && FAILED(hr = copy_tree(files, volume)))
            return hr;
    }
    volume_name(layer, name);
    standin_state_file(L"volumes", name, state, MAX_PATH);
    if (FAILED(hr = standin_write(state, volume)))
        return hr;
    return set_marker(layer, L"prepared");
}

HRESULT WINAPI GetLayerMountPath(const DRIVER_INFO *info, const WCHAR *id, SIZE_T *length, WCHAR *buffer)
{
    WCHAR layer[MAX_PATH], name[MAX_PATH];
    SIZE_T n;
    layer_path(info, id, layer);
    if (!has_marker(layer, L"prepared"))
        return E_BAD_STATE;
    volume_name(layer, name);
    n = wcslen(name) + 1;
    if (buffer) {
        if (*length < n)
            return HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER);
        memcpy(buffer, name, n * sizeof(WCHAR));
    }
    *length = n;
    return S_OK;
}

HRESULT WINAPI UnprepareLayer(const DRIVER_INFO *info, const WCHAR *id)
{
    WCHAR layer[MAX_PATH], name[MAX_PATH], state[MAX_PATH];
    layer_path(info, id, layer);
    if (!has_marker(layer, L"prepared"))
        return E_BAD_STATE;
    volume_name(layer, name);
    standin_state_file(L"volumes", name, state, MAX_PATH);
    DeleteFileW(state);
    clear_marker(layer, L"prepared");
    return S_OK;
}

HRESULT WINAPI DeactivateLayer(const DRIVER_INFO *info, const WCHAR *id)
{
    WCHAR layer[MAX_PATH];
    layer_path(info, id, layer);
    if (has_marker(layer, L"prepared"))
        return HRESULT_FROM_WIN32(ERROR_BUSY);
    if (!has_marker(layer, L"active"))
        return E_BAD_STATE;
    clear_marker(layer, L"active");
    return S_OK;
}

#define LINUX_LSTAT 6
#define LINUX_S_IFMT 0170000
#define LINUX_S_IFLNK 0120000

/* is_link says whether p is a link: a reparse point, or a Linux symbolic
 * link, which Wine may show as what it points to. */
static BOOL is_link(const WCHAR *p)
{
    unsigned long long st[18]; /* struct stat on x86_64; st_mode at byte 24 */
    DWORD a = GetFileAttributesW(p);
    char *u;
    long rc;
    if (a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_REPARSE_POINT))
        return TRUE;
    u = standin_unix(p);
    rc = u ? standin_linux2(LINUX_LSTAT, u, (const char *)st) : -1;
    HeapFree(GetProcessHeap(), 0, u);
    return rc == 0 && ((unsigned int)st[3] & LINUX_S_IFMT) == LINUX_S_IFLNK;
}

/* remove_tree removes p and what it holds; a link is removed, not what it
 * points to. */
static HRESULT remove_tree(const WCHAR *p)
{
    WCHAR pattern[MAX_PATH], child[MAX_PATH];
    WIN32_FIND_DATAW fd;
    HANDLE h;
    HRESULT hr = S_OK;
    DWORD a;
    if (is_link(p)) {
        char *u = standin_unix(p);
        long rc = u ? standin_linux2(LINUX_UNLINK, u, NULL) : -1;
        HeapFree(GetProcessHeap(), 0, u);
        return rc == 0 ? S_OK : HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED);
    }
    a = GetFileAttributesW(p);
    if (a == INVALID_FILE_ATTRIBUTES)
        return HRESULT_FROM_WIN32(GetLastError());
    if (!(a & FILE_ATTRIBUTE_DIRECTORY)) {
        SetFileAttributesW(p, FILE_ATTRIBUTE_NORMAL);
        return DeleteFileW(p) ? S_OK : HRESULT_FROM_WIN32(GetLastError());
    }
    swprintf(pattern, MAX_PATH, L"%ls\\*", p);
    h = FindFirstFileW(pattern, &fd);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (!wcscmp(fd.cFileName, L".") || !wcscmp(fd.cFileName, L".."))
                continue;
            swprintf(child, MAX_PATH, L"%ls\\%ls", p, fd.cFileName);
            hr = remove_tree(child);
        } while (SUCCEEDED(hr) && FindNextFileW(h, &fd));
        FindClose(h);
    }
    if (FAILED(hr))
        return hr;
    return RemoveDirectoryW(p) ? S_OK : HRESULT_FROM_WIN32(GetLastError());
}

HRESULT WINAPI DestroyLayer(const DRIVER_INFO *info, const WCHAR *id)
{
    WCHAR layer[MAX_PATH];
    layer_path(info, id, layer);
    if (!is_dir(layer))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    if (has_marker(layer, L"active"))
        return HRESULT_FROM_WIN32(ERROR_SHARING_VIOLATION);
    if (has_marker(layer, L"denied"))
        return E_ACCESSDENIED;
    return remove_tree(layer);
}

HRESULT WINAPI ExpandSandboxSize(const DRIVER_INFO *info, const WCHAR *id, UINT64 size)
{
    WCHAR layer[MAX_PATH], vhd[MAX_PATH], m[MAX_PATH], text[32];
    layer_path(info, id, layer);
    if (!is_dir(layer))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    swprintf(vhd, MAX_PATH, L"%ls\\sandbox.vhdx", layer);
    if (!exists(vhd))
        return HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND);
    swprintf(text, 32, L"%llu", (unsigned long long)size);
    marker(layer, L"size", m);
    return standin_write(m, text);
}

HRESULT WINAPI NameToGuid(const WCHAR *name, GUID *guid)
{
    *guid = standin_guid(name);
    return S_OK;
}

/*
 * HNSCall(method, path, request, response): the Host Network Service's
 * legacy (v1) call, which Microsoft does not document. It is written here
 * as its incumbent callers read it (github.com/Microsoft/hnslib hcn
 * hcnglobals.go hnsCall and internal/hns hnsfuncs.go): the answer is a
 * JSON document {"Success":bool,"Error":string,"Output":...} in memory of
 * CoTaskMemAlloc's, which the caller frees (CoTaskMemFree, through
 * interop.ConvertAndFreeCoTaskMemString); a failed call is an HRESULT.
 *
 * What it answers: GET /endpoints/ (internal/hns hnsendpoint.go
 * HNSListEndpointRequest, which the kubelet's /stats/summary calls for its
 * pods' network statistics) lists the node's HNS endpoints: none, since
 * the HCN stand-in (computenetwork.c) makes namespaces only and the test
 * CNI plugin makes no endpoint. Any other method or path is E_NOTIMPL.
 *
 * It leaves unproven: endpoints, networks and policies, their statistics
 * (GET /endpointstats/<id>), HNS's own answers to an unknown path or a
 * failed request, and its versions (GET /globals/version).
 */
typedef void *WINAPI alloc_t(SIZE_T);

HRESULT WINAPI HNSCall(const WCHAR *method, const WCHAR *path, const WCHAR *request, WCHAR **response)
{
    static const WCHAR endpoints[] = L"{\"Success\":true,\"Error\":\"\",\"Output\":[]}";
    (void)request;
    if (!method || !path || !response)
        return E_POINTER;
    *response = NULL;
    if (wcscmp(method, L"GET") || wcscmp(path, L"/endpoints/"))
        return E_NOTIMPL;
    /* ole32 is loaded here, by the one caller of HNSCall (the kubelet),
     * not at this DLL's load: an import of it would load Wine's ole32 and
     * its COM runtime (some 4 MiB) into every process that loads the layer
     * functions, every shim among them, and weigh on the node's memory
     * figures (docs/peer.md). */
    alloc_t *alloc = (alloc_t *)(void *)GetProcAddress(LoadLibraryW(L"ole32.dll"), "CoTaskMemAlloc");
    if (!alloc)
        return HRESULT_FROM_WIN32(GetLastError());
    *response = alloc(sizeof(endpoints));
    if (!*response)
        return E_OUTOFMEMORY;
    memcpy(*response, endpoints, sizeof(endpoints));
    return S_OK;
}
