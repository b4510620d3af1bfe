/*
 * What the node's stand-in DLLs share: their state directory, a name's
 * GUID, and the Linux side of Wine's paths.
 *
 * The stand-ins keep their state in files under C:\ProgramData\winproc-standins
 * (Windows keeps it in the layer service and the bind filter driver), so
 * that every process that loads them (containerd.exe, the shim's
 * processes) sees the same volumes and mappings.
 */
#include <windows.h>
#include <wchar.h>

#define STANDIN_STATE L"C:\\ProgramData\\winproc-standins"

/* standin_guid is a GUID made from the FNV-1a hash of name, without case. */
static inline GUID standin_guid(const WCHAR *name)
{
    unsigned long long h1 = 14695981039346656037ULL, h2 = 1099511628211ULL * 31;
    GUID g;
    for (; *name; name++) {
        WCHAR c = towlower(*name);
        h1 = (h1 ^ c) * 1099511628211ULL;
        h2 = (h2 ^ c) * 1469598103934665603ULL + 7;
    }
    memcpy(&g, &h1, 8);
    memcpy((char *)&g + 8, &h2, 8);
    return g;
}

/* standin_state_file is <STANDIN_STATE>\<kind>\{guid of name}; the kind's
 * directory is made. */
static inline void standin_state_file(const WCHAR *kind, const WCHAR *name, WCHAR *out, size_t n)
{
    GUID g = standin_guid(name);
    WCHAR dir[MAX_PATH];
    CreateDirectoryW(STANDIN_STATE, NULL);
    swprintf(dir, MAX_PATH, L"%ls\\%ls", STANDIN_STATE, kind);
    CreateDirectoryW(dir, NULL);
    swprintf(out, n, L"%ls\\{%08lX-%04hX-%04hX-%02X%02X-%02X%02X%02X%02X%02X%02X}", dir,
             g.Data1, g.Data2, g.Data3, g.Data4[0], g.Data4[1], g.Data4[2], g.Data4[3],
             g.Data4[4], g.Data4[5], g.Data4[6], g.Data4[7]);
}

/* standin_write and standin_read keep one line of text in a state file. */
static inline HRESULT standin_write(const WCHAR *file, const WCHAR *text)
{
    HANDLE f = CreateFileW(file, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    DWORD n;
    BOOL ok;
    if (f == INVALID_HANDLE_VALUE)
        return HRESULT_FROM_WIN32(GetLastError());
    ok = WriteFile(f, text, (DWORD)(wcslen(text) * sizeof(WCHAR)), &n, NULL);
    CloseHandle(f);
    return ok ? S_OK : HRESULT_FROM_WIN32(GetLastError());
}

static inline BOOL standin_read(const WCHAR *file, WCHAR *text, size_t n)
{
    HANDLE f = CreateFileW(file, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, 0, NULL);
    DWORD got = 0;
    if (f == INVALID_HANDLE_VALUE)
        return FALSE;
    ReadFile(f, text, (DWORD)((n - 1) * sizeof(WCHAR)), &got, NULL);
    CloseHandle(f);
    text[got / sizeof(WCHAR)] = 0;
    return TRUE;
}

/* standin_unix is Wine's Linux path of a Windows path (the last element
 * need not exist), or NULL; HeapFree it. */
static inline char *standin_unix(const WCHAR *path)
{
    typedef char *(CDECL *unix_name_fn)(const WCHAR *);
    unix_name_fn f = (unix_name_fn)(void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "wine_get_unix_file_name");
    return f ? f(path) : NULL;
}

/* standin_linux2 is a Linux system call with two arguments, made directly:
 * Wine gives Windows code no way to make a symbolic link a Linux program
 * sees (CreateSymbolicLinkW does nothing), and a binding is one. */
static inline long standin_linux2(long nr, const char *a, const char *b)
{
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return ret;
}

#define LINUX_UNLINK 87
#define LINUX_SYMLINK 88
