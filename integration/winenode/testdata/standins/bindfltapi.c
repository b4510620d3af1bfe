/*
 * A stand-in for bindfltapi.dll, for the Windows node under Wine
 * (integration/winenode): BfSetupFilter and BfRemoveMapping with their
 * signatures and their contract as go-winio's pkg/bindfilter relies on it
 * (containerd.exe's mounts, the HostProcess backend's rootfs and mapped
 * directories): a mapping makes a path (the virtualization root) show a
 * directory or a volume (the backing target) until it is removed; a root
 * mapped twice is ERROR_ALREADY_EXISTS; removing a root without a
 * mapping is ERROR_NOT_FOUND. Volumes are the layer stand-in's
 * (vmcompute.c), resolved to their directories.
 *
 * A mapping is a Linux symbolic link at the root, which Wine follows as a
 * directory; an empty directory at the root is put back when the mapping
 * goes.
 *
 * It leaves unproven what only the bind filter does: read-only mappings
 * (BINDFLT_FLAG_READ_ONLY_MAPPING is recorded, not enforced), mappings
 * scoped to a job or a silo, exception paths, mapped files (not
 * directories), and BfGetMappings, which it does not offer.
 */
#include "standin.h"

#define E_NOT_FOUND HRESULT_FROM_WIN32(ERROR_NOT_FOUND)

/* target_dir is the directory a target names: a volume's, or itself. */
static HRESULT target_dir(const WCHAR *target, WCHAR *out)
{
    WCHAR name[MAX_PATH], state[MAX_PATH];
    size_t n;
    if (!wcsncmp(target, L"\\\\?\\Volume{", 11)) {
        wcsncpy(name, target, MAX_PATH - 1);
        name[MAX_PATH - 1] = 0;
        n = wcslen(name);
        if (n && name[n - 1] != L'\\')
            wcscat(name, L"\\");
        standin_state_file(L"volumes", name, state, MAX_PATH);
        if (!standin_read(state, out, MAX_PATH))
            return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
        return S_OK;
    }
    wcsncpy(out, target, MAX_PATH - 1);
    out[MAX_PATH - 1] = 0;
    return S_OK;
}

/* clean drops trailing backslashes, so a root has one name. */
static void clean(const WCHAR *p, WCHAR *out)
{
    size_t n;
    wcsncpy(out, p, MAX_PATH - 1);
    out[MAX_PATH - 1] = 0;
    n = wcslen(out);
    while (n > 3 && out[n - 1] == L'\\')
        out[--n] = 0;
}

HRESULT WINAPI BfSetupFilter(HANDLE job, ULONG flags, const WCHAR *root, const WCHAR *target,
                             const WCHAR *const *exceptions, ULONG exception_count)
{
    WCHAR r[MAX_PATH], dir[MAX_PATH], state[MAX_PATH], record[2 * MAX_PATH + 16];
    char *ur, *ud;
    DWORD attrs;
    BOOL was_dir = FALSE;
    HRESULT hr;
    long rc;
    (void)exceptions;
    if (job || exception_count)
        return E_NOTIMPL;
    clean(root, r);
    standin_state_file(L"mappings", r, state, MAX_PATH);
    if (GetFileAttributesW(state) != INVALID_FILE_ATTRIBUTES)
        return HRESULT_FROM_WIN32(ERROR_ALREADY_EXISTS);
    if (FAILED(hr = target_dir(target, dir)))
        return hr;
    attrs = GetFileAttributesW(dir);
    if (attrs == INVALID_FILE_ATTRIBUTES || !(attrs & FILE_ATTRIBUTE_DIRECTORY))
        return HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND);
    attrs = GetFileAttributesW(r);
    if (attrs != INVALID_FILE_ATTRIBUTES) {
        if (!(attrs & FILE_ATTRIBUTE_DIRECTORY) || !RemoveDirectoryW(r))
            return HRESULT_FROM_WIN32(ERROR_DIR_NOT_EMPTY);
        was_dir = TRUE;
    }
    ur = standin_unix(r);
    ud = standin_unix(dir);
    rc = (ur && ud) ? standin_linux2(LINUX_SYMLINK, ud, ur) : -1;
    HeapFree(GetProcessHeap(), 0, ur);
    HeapFree(GetProcessHeap(), 0, ud);
    if (rc != 0) {
        if (was_dir)
            CreateDirectoryW(r, NULL);
        return HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED);
    }
    swprintf(record, sizeof record / sizeof record[0], L"%d %lu %ls", was_dir, flags, dir);
    return standin_write(state, record);
}

HRESULT WINAPI BfRemoveMapping(HANDLE job, const WCHAR *root)
{
    WCHAR r[MAX_PATH], state[MAX_PATH], record[2 * MAX_PATH + 16];
    char *ur;
    long rc;
    if (job)
        return E_NOTIMPL;
    clean(root, r);
    standin_state_file(L"mappings", r, state, MAX_PATH);
    if (!standin_read(state, record, sizeof record / sizeof record[0]))
        return E_NOT_FOUND;
    ur = standin_unix(r);
    rc = ur ? standin_linux2(LINUX_UNLINK, ur, NULL) : -1;
    HeapFree(GetProcessHeap(), 0, ur);
    if (rc != 0 && rc != -2 /* ENOENT */)
        return HRESULT_FROM_WIN32(ERROR_ACCESS_DENIED);
    if (record[0] == L'1')
        CreateDirectoryW(r, NULL);
    DeleteFileW(state);
    return S_OK;
}
