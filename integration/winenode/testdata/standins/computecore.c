/*
 * A stand-in for computecore.dll (HCS) for the Windows node under Wine
 * (integration/winenode), serving process-isolated containers with real
 * Windows processes: the functions shim/hcs's binding calls, with
 * computecore.h's signatures and HCS's model as the binding relies on it
 * (operations completed on threads of their own, LocalAlloc'ed results,
 * notifications on other threads, a process's stdio as overlapped pipe
 * handles handed over once). A compute system is a job object; its
 * processes are started suspended, put in the job and resumed.
 *
 * Wine has no silos, so a container cannot have a C: of its own. The
 * container's C:\ is its volume instead: the directory the layer stand-in
 * (vmcompute.c) made for the scratch named by the document's
 * Storage.Path. Every C:\ in a process's command line and working
 * directory is read as a path in that directory; a program named without
 * a directory is looked for there first; a mapped directory is a Linux
 * symbolic link in it. Each document a system is created with is kept in C:\ProgramData\winproc-standins\documents\<id>.json,
 * each process's parameters in <id>-process-<pid>.json.
 *
 * It leaves unproven what only HCS does: whether HCS accepts the
 * documents, the silo (its own C:, registry, users, network compartment,
 * isolation from the host), users (a process runs as Wine's user),
 * read-only mapped directories (not enforced) and mapped pipes, console
 * emulation (EmulateConsole is ignored), resource limits (recorded, not
 * applied),
 * a system that outlives the process that made it (systems are known to
 * the process that created them only), and HCS's own errors and timing:
 * the errors a test asks for (faults.h) come in HCS's form, from the call
 * or its operation, but their causes are not simulated.
 */
#include "standin.h"
#include "faults.h"
#include <stdio.h>
#include <stdlib.h>

#define HCS_E_SYSTEM_NOT_FOUND ((HRESULT)0x8037010EL)
#define HCS_E_SYSTEM_ALREADY_EXISTS ((HRESULT)0x8037010FL)
#define HCS_E_OPERATION_TIMEOUT ((HRESULT)0x80370118L)
#define HCS_E_PROCESS_NOT_FOUND HRESULT_FROM_WIN32(ERROR_NOT_FOUND)
#define EVENT_SYSTEM_EXITED 0x00000001
#define EVENT_PROCESS_EXITED 0x00010000

typedef void(CALLBACK *event_callback)(void *event, void *context);

typedef struct {
    UINT32 Type;
    PCWSTR EventData;
    void *Operation;
} HCS_EVENT;

typedef struct {
    DWORD ProcessId;
    DWORD Reserved;
    HANDLE StdInput;
    HANDLE StdOutput;
    HANDLE StdError;
} HCS_PROCESS_INFORMATION;

typedef struct {
    HANDLE done;
    HANDLE canceled;
    LONG pending;
    HRESULT hr;
    WCHAR *result;
    HCS_PROCESS_INFORMATION info;
} op_t;

typedef struct process process_t;

typedef struct {
    WCHAR id[256];
    WCHAR owner[64];
    WCHAR volume[MAX_PATH]; /* the container's C:\ */
    HANDLE job;
    FILETIME started;
    LONG exited;
    event_callback cb;
    void *ctx;
    process_t *processes[256];
    LONG nprocesses;
    char *links[32]; /* mapped directories: Linux links in the volume */
    int nlinks;
} sys_t;

struct process {
    sys_t *sys;
    PROCESS_INFORMATION pi;
    HANDLE callback_set;
    event_callback cb;
    void *ctx;
};

static CRITICAL_SECTION lock;
static sys_t *systems[256];
static LONG nsystems;
static volatile LONG pipe_seq;

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, void *reserved)
{
    (void)inst;
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH)
        InitializeCriticalSection(&lock);
    return TRUE;
}

static WCHAR *dup_w(const WCHAR *s)
{
    size_t n = s ? wcslen(s) : 0;
    WCHAR *d = malloc((n + 1) * sizeof(WCHAR));
    if (s)
        memcpy(d, s, n * sizeof(WCHAR));
    d[n] = 0;
    return d;
}

/* json_read reads the JSON string at p (its opening quote) into out,
 * unescaped, and returns what follows its closing quote. */
static const WCHAR *json_read(const WCHAR *p, WCHAR *out, size_t n)
{
    size_t i = 0;
    for (p++; *p && *p != L'"'; p++) {
        WCHAR c = *p;
        if (c == L'\\' && p[1]) {
            c = *++p;
            if (c == L'u' && p[1] && p[2] && p[3] && p[4]) {
                WCHAR hex[5] = {p[1], p[2], p[3], p[4], 0};
                c = (WCHAR)wcstoul(hex, NULL, 16);
                p += 4;
            } else if (c == L'n')
                c = L'\n';
            else if (c == L't')
                c = L'\t';
            else if (c == L'r')
                c = L'\r';
        }
        if (i + 1 < n)
            out[i++] = c;
    }
    out[i] = 0;
    return *p ? p + 1 : p;
}

/* json_string copies the string value of the first "key" in doc into out;
 * FALSE when there is none. */
static BOOL json_string(const WCHAR *doc, const WCHAR *key, WCHAR *out, size_t n)
{
    WCHAR pat[128];
    const WCHAR *p;
    swprintf(pat, 128, L"\"%ls\":\"", key);
    if (!doc || !(p = wcsstr(doc, pat)))
        return FALSE;
    json_read(p + wcslen(pat) - 1, out, n);
    return TRUE;
}

static BOOL json_true(const WCHAR *doc, const WCHAR *key)
{
    WCHAR pat[128];
    swprintf(pat, 128, L"\"%ls\":true", key);
    return doc && wcsstr(doc, pat) != NULL;
}

/* container_path rewrites every C:\ in in as the container's volume. */
static void container_path(const sys_t *s, const WCHAR *in, WCHAR *out, size_t n)
{
    size_t i = 0, vl = wcslen(s->volume);
    while (*in && i + 1 < n) {
        if ((in[0] == L'C' || in[0] == L'c') && in[1] == L':' && in[2] == L'\\' && i + vl + 1 < n) {
            memcpy(out + i, s->volume, vl * sizeof(WCHAR));
            i += vl;
            in += 2;
        } else
            out[i++] = *in++;
    }
    out[i] = 0;
}

/* with_program puts the volume's copy of a program named without a
 * directory in front of the command line. */
static void with_program(const sys_t *s, const WCHAR *line, WCHAR *out, size_t n)
{
    WCHAR name[MAX_PATH], path[MAX_PATH];
    size_t k = 0;
    const WCHAR *rest = line;
    if (*line == L'"' || wcschr(line, L'\\') == NULL || (wcschr(line, L' ') && wcschr(line, L'\\') > wcschr(line, L' '))) {
        while (*rest && *rest != L' ' && k + 1 < MAX_PATH)
            name[k++] = *rest++;
        name[k] = 0;
        if (*line != L'"' && !wcschr(name, L'\\')) {
            swprintf(path, MAX_PATH, L"%ls\\%ls", s->volume, name);
            if (GetFileAttributesW(path) == INVALID_FILE_ATTRIBUTES)
                wcscat(path, L".exe");
            if (GetFileAttributesW(path) != INVALID_FILE_ATTRIBUTES) {
                swprintf(out, n, L"\"%ls\"%ls", path, rest);
                return;
            }
        }
    }
    swprintf(out, n, L"%ls", line);
}

/* base_env reports the variables of the stand-in's own environment a
 * container's process starts with, as a container user's default block
 * holds them (HCS takes them from the container's registry): the system's
 * directories, PATH and the profile's, and Wine's own. */
static BOOL base_env(const WCHAR *name, size_t k)
{
    static const WCHAR *keep[] = {L"SystemRoot", L"windir", L"SystemDrive", L"ComSpec", L"PATHEXT", L"PATH",
                                  L"TEMP", L"TMP", L"ProgramData", L"ProgramFiles", L"ProgramFiles(x86)",
                                  L"ProgramW6432", L"CommonProgramFiles", L"ALLUSERSPROFILE", L"USERPROFILE",
                                  L"APPDATA", L"LOCALAPPDATA", L"PUBLIC", L"COMPUTERNAME", L"USERNAME",
                                  L"USERDOMAIN", L"OS", L"PROCESSOR_ARCHITECTURE", L"NUMBER_OF_PROCESSORS"};
    size_t i;
    if (k >= 4 && !_wcsnicmp(name, L"WINE", 4))
        return TRUE;
    for (i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (wcslen(keep[i]) == k && !_wcsnicmp(name, keep[i], k))
            return TRUE;
    return FALSE;
}

/* environment is the base of the stand-in's own environment (base_env)
 * with the document's Environment over it, as a CreateProcess block. */
static WCHAR *environment(const WCHAR *doc)
{
    WCHAR *own = GetEnvironmentStringsW(), *block, *b, *key = malloc(32768 * sizeof(WCHAR)), *val = malloc(32768 * sizeof(WCHAR));
    const WCHAR *e, *p;
    size_t n = 2;
    for (e = own; *e; e += wcslen(e) + 1)
        n += wcslen(e) + 1;
    n += doc ? wcslen(doc) : 0;
    b = block = calloc(n, sizeof(WCHAR));
    if (doc && (p = wcsstr(doc, L"\"Environment\":{"))) {
        p += wcslen(L"\"Environment\":{");
        while (*p == L'"') {
            p = json_read(p, key, 32768);
            if (*p++ != L':' || *p != L'"')
                break;
            p = json_read(p, val, 32768);
            b += swprintf(b, n - (b - block), L"%ls=%ls", key, val) + 1;
            if (*p == L',')
                p++;
        }
    }
    for (e = own; *e; e += wcslen(e) + 1) {
        const WCHAR *eq = wcschr(e + 1, L'=');
        WCHAR pat[1100];
        size_t k = eq ? (size_t)(eq - e) : 0;
        if (!eq || k >= 1024 || !base_env(e, k))
            continue;
        swprintf(pat, 1100, L"\"%.*ls\":", (int)k, e);
        if (doc && wcsstr(doc, pat))
            continue;
        wcscpy(b, e);
        b += wcslen(e) + 1;
    }
    *b = 0;
    FreeEnvironmentStringsW(own);
    free(key);
    free(val);
    return block;
}

static DWORD WINAPI complete_later(void *arg)
{
    op_t *op = arg;
    Sleep(1);
    SetEvent(op->done);
    return 0;
}

static void complete(op_t *op, HRESULT hr, const WCHAR *result)
{
    op->hr = hr;
    op->result = result ? dup_w(result) : NULL;
    op->pending = 1;
    CloseHandle(CreateThread(NULL, 0, complete_later, op, 0, NULL));
}

static HRESULT take_result(op_t *op, PWSTR *doc)
{
    if (doc) {
        *doc = NULL;
        if (op->result) {
            size_t n = (wcslen(op->result) + 1) * sizeof(WCHAR);
            *doc = LocalAlloc(LMEM_FIXED, n);
            memcpy(*doc, op->result, n);
        }
    }
    return op->hr;
}

__declspec(dllexport) void *WINAPI HcsCreateOperation(const void *context, void *callback)
{
    op_t *op = calloc(1, sizeof(op_t));
    (void)context;
    (void)callback;
    op->done = CreateEventW(NULL, TRUE, FALSE, NULL);
    op->canceled = CreateEventW(NULL, TRUE, FALSE, NULL);
    return op;
}

__declspec(dllexport) void WINAPI HcsCloseOperation(op_t *op)
{
    if (op->pending)
        WaitForSingleObject(op->done, INFINITE);
    CloseHandle(op->done);
    CloseHandle(op->canceled);
    free(op->result);
    free(op);
}

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResult(op_t *op, DWORD timeout, PWSTR *doc)
{
    if (WaitForSingleObject(op->done, timeout) != WAIT_OBJECT_0)
        return HCS_E_OPERATION_TIMEOUT;
    return take_result(op, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResultAndProcessInfo(op_t *op, DWORD timeout, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
    if (WaitForSingleObject(op->done, timeout) != WAIT_OBJECT_0)
        return HCS_E_OPERATION_TIMEOUT;
    *info = op->info;
    return take_result(op, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsGetOperationResult(op_t *op, PWSTR *doc) { return take_result(op, doc); }

__declspec(dllexport) HRESULT WINAPI HcsCancelOperation(op_t *op)
{
    SetEvent(op->canceled);
    return S_OK;
}

/* stall_later completes a stalled operation once it is cancelled (or
 * after a minute, so that no test hangs on a caller that never cancels). */
static DWORD WINAPI stall_later(void *arg)
{
    op_t *op = arg;
    WaitForSingleObject(op->canceled, 60000);
    op->hr = HCS_E_OPERATION_TIMEOUT;
    SetEvent(op->done);
    return 0;
}

/* faulted applies the test's fault of function to its operation: it
 * answers whether the function is done, and with what. */
static BOOL faulted(const char *function, op_t *op, HRESULT *ret)
{
    HRESULT hr = S_OK;
    *ret = S_OK;
    switch (standin_fault(function, &hr)) {
    case FAULT_CALL:
        *ret = hr;
        return TRUE;
    case FAULT_OP: {
        WCHAR doc[160];
        swprintf(doc, 160, L"{\"Error\":%ld,\"ErrorMessage\":\"the stand-in's fault for %hs\"}", (long)hr, function);
        complete(op, hr, doc);
        return TRUE;
    }
    case FAULT_STALL:
        op->pending = 1;
        CloseHandle(CreateThread(NULL, 0, stall_later, op, 0, NULL));
        return TRUE;
    }
    return FALSE;
}

typedef struct {
    event_callback cb;
    void *ctx;
    UINT32 type;
    WCHAR *data;
} notify_t;

static DWORD WINAPI notify_thread(void *arg)
{
    notify_t *n = arg;
    HCS_EVENT ev = {n->type, n->data, NULL};
    n->cb(&ev, n->ctx);
    free(n->data);
    free(n);
    return 0;
}

static void notify(event_callback cb, void *ctx, UINT32 type, const WCHAR *data)
{
    notify_t *n;
    if (!cb)
        return;
    n = calloc(1, sizeof(notify_t));
    n->cb = cb;
    n->ctx = ctx;
    n->type = type;
    n->data = dup_w(data);
    CloseHandle(CreateThread(NULL, 0, notify_thread, n, 0, NULL));
}

static sys_t *find_system(const WCHAR *id)
{
    LONG i;
    for (i = 0; i < nsystems; i++)
        if (systems[i] && !wcscmp(systems[i]->id, id))
            return systems[i];
    return NULL;
}

/* keep_document writes the document to the stand-in's documents. */
static void keep_document(const WCHAR *id, const WCHAR *config)
{
    WCHAR dir[MAX_PATH], file[MAX_PATH];
    int n = WideCharToMultiByte(CP_UTF8, 0, config, -1, NULL, 0, NULL, NULL);
    char *utf8 = malloc(n);
    HANDLE f;
    DWORD written;
    WideCharToMultiByte(CP_UTF8, 0, config, -1, utf8, n, NULL, NULL);
    CreateDirectoryW(STANDIN_STATE, NULL);
    swprintf(dir, MAX_PATH, L"%ls\\documents", STANDIN_STATE);
    CreateDirectoryW(dir, NULL);
    swprintf(file, MAX_PATH, L"%ls\\%ls.json", dir, id);
    f = CreateFileW(file, GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    if (f != INVALID_HANDLE_VALUE) {
        WriteFile(f, utf8, n - 1, &written, NULL);
        CloseHandle(f);
    }
    free(utf8);
}

/* map_directories makes each of the document's MappedDirectories a
 * Linux symbolic link at its container path in the volume, which Wine
 * follows as a directory; the links go when the system exits (a link left
 * in a scratch would lead a removal into the host's directory). */
static void map_directories(sys_t *s, const WCHAR *config)
{
    const WCHAR *p = wcsstr(config, L"\"MappedDirectories\":[");
    const WCHAR *end = p ? wcschr(p, L']') : NULL;
    WCHAR host[MAX_PATH], where[MAX_PATH], link[MAX_PATH];
    while (p && end && (p = wcsstr(p, L"\"HostPath\":\"")) && p < end && s->nlinks < 32) {
        const WCHAR *c = wcsstr(p, L"\"ContainerPath\":\"");
        char *uh, *ul;
        json_read(p + wcslen(L"\"HostPath\":"), host, MAX_PATH);
        if (!c || c > end)
            break;
        json_read(c + wcslen(L"\"ContainerPath\":"), where, MAX_PATH);
        container_path(s, where, link, MAX_PATH);
        uh = standin_unix(host);
        ul = standin_unix(link);
        if (uh && ul && standin_linux2(LINUX_SYMLINK, uh, ul) == 0)
            s->links[s->nlinks++] = ul;
        else
            HeapFree(GetProcessHeap(), 0, ul);
        HeapFree(GetProcessHeap(), 0, uh);
        p = c;
    }
}

/* keep_process_document adds a process's parameters to the documents. */
static void keep_process_document(const sys_t *s, DWORD pid, const WCHAR *params)
{
    WCHAR name[300];
    swprintf(name, 300, L"%ls-process-%lu", s->id, pid);
    keep_document(name, params);
}

__declspec(dllexport) HRESULT WINAPI HcsCreateComputeSystem(PCWSTR id, PCWSTR config, op_t *op, const void *sd, sys_t **out)
{
    WCHAR volume[MAX_PATH], state[MAX_PATH];
    sys_t *s;
    HRESULT hr;
    (void)sd;
    *out = NULL;
    if (faulted("HcsCreateComputeSystem", op, &hr))
        return hr;
    keep_document(id, config);
    EnterCriticalSection(&lock);
    if (find_system(id)) {
        LeaveCriticalSection(&lock);
        complete(op, HCS_E_SYSTEM_ALREADY_EXISTS, L"{\"Error\":-2143354609,\"ErrorMessage\":\"A compute system with this id exists\"}");
        return S_OK;
    }
    s = calloc(1, sizeof(sys_t));
    wcsncpy(s->id, id, 255);
    json_string(config, L"Owner", s->owner, 64);
    /* Storage.Path: the one "Path" that names a volume. */
    for (const WCHAR *p = config; (p = wcsstr(p, L"\"Path\":\"")); p++) {
        json_read(p + wcslen(L"\"Path\":"), volume, MAX_PATH);
        if (!wcsncmp(volume, L"\\\\?\\Volume{", 11)) {
            standin_state_file(L"volumes", volume, state, MAX_PATH);
            standin_read(state, s->volume, MAX_PATH);
            break;
        }
    }
    s->job = CreateJobObjectW(NULL, NULL);
    systems[nsystems++] = s;
    LeaveCriticalSection(&lock);
    if (s->volume[0])
        map_directories(s, config);

    if (!s->volume[0]) {
        complete(op, HRESULT_FROM_WIN32(ERROR_PATH_NOT_FOUND), L"{\"ErrorMessage\":\"the document's Storage.Path is not a prepared volume\"}");
        return S_OK;
    }
    *out = s;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenComputeSystem(PCWSTR id, DWORD access, sys_t **out)
{
    (void)access;
    EnterCriticalSection(&lock);
    *out = find_system(id);
    LeaveCriticalSection(&lock);
    return *out ? S_OK : HCS_E_SYSTEM_NOT_FOUND;
}

/* HcsEnumerateComputeSystems lists the systems this process knows (the
 * stand-in's systems are known only to the process that made them), of
 * the owners the query names, if it names any. */
__declspec(dllexport) HRESULT WINAPI HcsEnumerateComputeSystems(PCWSTR query, op_t *op)
{
    size_t n = 2, used;
    WCHAR *doc, owner[80];
    LONG i;
    EnterCriticalSection(&lock);
    n += (size_t)nsystems * 400;
    doc = calloc(n, sizeof(WCHAR));
    wcscpy(doc, L"[");
    for (i = 0; i < nsystems; i++) {
        sys_t *s = systems[i];
        if (!s)
            continue;
        swprintf(owner, 80, L"\"%ls\"", s->owner);
        if (query && wcsstr(query, L"\"Owners\"") && !wcsstr(query, owner))
            continue;
        used = wcslen(doc);
        swprintf(doc + used, n - used, L"%ls{\"Id\":\"%ls\",\"Owner\":\"%ls\",\"State\":\"Running\",\"SystemType\":\"Container\"}",
                 used > 1 ? L"," : L"", s->id, s->owner);
    }
    LeaveCriticalSection(&lock);
    wcscat(doc, L"]");
    complete(op, S_OK, doc);
    free(doc);
    return S_OK;
}

/* Systems stay known to this process until terminated: a handle's close
 * does not end a compute system. */
__declspec(dllexport) void WINAPI HcsCloseComputeSystem(sys_t *s) { (void)s; }

__declspec(dllexport) HRESULT WINAPI HcsStartComputeSystem(sys_t *s, op_t *op, PCWSTR options)
{
    HRESULT hr;
    (void)options;
    if (faulted("HcsStartComputeSystem", op, &hr))
        return hr;
    GetSystemTimeAsFileTime(&s->started);
    complete(op, S_OK, NULL);
    return S_OK;
}

/* exited notifies the system's exit once and forgets it. */
static void exited(sys_t *s)
{
    LONG i;
    if (InterlockedExchange(&s->exited, 1))
        return;
    EnterCriticalSection(&lock);
    for (i = 0; i < nsystems; i++)
        if (systems[i] == s)
            systems[i] = NULL;
    LeaveCriticalSection(&lock);
    for (i = 0; i < s->nlinks; i++) {
        standin_linux2(LINUX_UNLINK, s->links[i], NULL);
        HeapFree(GetProcessHeap(), 0, s->links[i]);
    }
    s->nlinks = 0;
    notify(s->cb, s->ctx, EVENT_SYSTEM_EXITED, L"{\"Status\":0,\"ExitType\":\"GracefulExit\"}");
}

static DWORD active_processes(sys_t *s)
{
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION a = {0};
    QueryInformationJobObject(s->job, JobObjectBasicAccountingInformation, &a, sizeof(a), NULL);
    return a.ActiveProcesses;
}

static void ctrl_event(HANDLE process, DWORD event)
{
    void *ctrl = (void *)GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "CtrlRoutine");
    HANDLE t;
    if (!ctrl)
        return;
    t = CreateRemoteThread(process, NULL, 0, (LPTHREAD_START_ROUTINE)ctrl, (void *)(ULONG_PTR)event, 0, NULL);
    if (t)
        CloseHandle(t);
}

typedef struct {
    sys_t *s;
    op_t *op;
} stop_t;

/* shutdown_later waits up to 10 s for the processes, which got
 * CTRL_SHUTDOWN_EVENT, to exit: HCS's shutdown completes when the
 * container has stopped, and times out otherwise. */
static DWORD WINAPI shutdown_later(void *arg)
{
    stop_t *st = arg;
    int i;
    for (i = 0; i < 100 && active_processes(st->s) > 0; i++)
        Sleep(100);
    if (active_processes(st->s) > 0) {
        complete(st->op, HCS_E_OPERATION_TIMEOUT, NULL);
    } else {
        complete(st->op, S_OK, NULL);
        exited(st->s);
    }
    free(st);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsShutDownComputeSystem(sys_t *s, op_t *op, PCWSTR options)
{
    stop_t *st;
    LONG i;
    HRESULT hr;
    (void)options;
    if (faulted("HcsShutDownComputeSystem", op, &hr))
        return hr;
    st = calloc(1, sizeof(stop_t));
    for (i = 0; i < s->nprocesses; i++)
        if (WaitForSingleObject(s->processes[i]->pi.hProcess, 0) != WAIT_OBJECT_0)
            ctrl_event(s->processes[i]->pi.hProcess, CTRL_SHUTDOWN_EVENT);
    st->s = s;
    st->op = op;
    op->pending = 1;
    CloseHandle(CreateThread(NULL, 0, shutdown_later, st, 0, NULL));
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateComputeSystem(sys_t *s, op_t *op, PCWSTR options)
{
    HRESULT hr;
    (void)options;
    if (faulted("HcsTerminateComputeSystem", op, &hr))
        return hr;
    TerminateJobObject(s->job, 1);
    complete(op, S_OK, NULL);
    exited(s);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyComputeSystem(sys_t *s, op_t *op, PCWSTR config, HANDLE identity)
{
    (void)s;
    (void)config;
    (void)identity;
    complete(op, S_OK, NULL);
    return S_OK;
}

static void iso_time(const FILETIME *ft, WCHAR *out)
{
    SYSTEMTIME st;
    FileTimeToSystemTime(ft, &st);
    swprintf(out, 64, L"%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", st.wYear, st.wMonth, st.wDay, st.wHour, st.wMinute, st.wSecond, st.wMilliseconds);
}

/* process_list is the job's processes as HCS's ProcessList. */
static void process_list(sys_t *s, WCHAR *out, size_t n)
{
    struct {
        JOBOBJECT_BASIC_PROCESS_ID_LIST l;
        ULONG_PTR more[255];
    } ids = {0};
    size_t i = 0;
    DWORD k;
    QueryInformationJobObject(s->job, JobObjectBasicProcessIdList, &ids, sizeof(ids), NULL);
    i += swprintf(out + i, n - i, L"[");
    for (k = 0; k < ids.l.NumberOfProcessIdsInList && i + 600 < n; k++) {
        WCHAR image[MAX_PATH] = L"", *base;
        DWORD len = MAX_PATH;
        HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)ids.l.ProcessIdList[k]);
        if (p) {
            QueryFullProcessImageNameW(p, 0, image, &len);
            CloseHandle(p);
        }
        base = wcsrchr(image, L'\\');
        i += swprintf(out + i, n - i, L"%ls{\"ProcessId\":%lu,\"ImageName\":\"%ls\"}", k ? L"," : L"",
                      (DWORD)ids.l.ProcessIdList[k], base ? base + 1 : image);
    }
    swprintf(out + i, n - i, L"]");
}

__declspec(dllexport) HRESULT WINAPI HcsGetComputeSystemProperties(sys_t *s, op_t *op, PCWSTR query)
{
    WCHAR *doc = malloc(65536 * sizeof(WCHAR)), now_s[64], start_s[64], list[60000];
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION a = {0};
    FILETIME now;
    ULONGLONG up;
    GetSystemTimeAsFileTime(&now);
    iso_time(&now, now_s);
    iso_time(&s->started, start_s);
    up = (((ULONGLONG)now.dwHighDateTime << 32) | now.dwLowDateTime) - (((ULONGLONG)s->started.dwHighDateTime << 32) | s->started.dwLowDateTime);
    QueryInformationJobObject(s->job, JobObjectBasicAccountingInformation, &a, sizeof(a), NULL);
    list[0] = 0;
    if (query && wcsstr(query, L"ProcessList"))
        process_list(s, list, 60000);
    swprintf(doc, 65536,
             L"{\"Id\":\"%ls\",\"State\":\"%ls\",\"Stopped\":%ls,\"Statistics\":{\"Timestamp\":\"%ls\",\"ContainerStartTime\":\"%ls\",\"Uptime100ns\":%llu,"
             L"\"Processor\":{\"TotalRuntime100ns\":%llu,\"RuntimeUser100ns\":%llu,\"RuntimeKernel100ns\":%llu}}%ls%ls}",
             s->id, s->exited ? L"Stopped" : L"Running", s->exited ? L"true" : L"false", now_s, start_s, up, a.TotalUserTime.QuadPart + a.TotalKernelTime.QuadPart, a.TotalUserTime.QuadPart,
             a.TotalKernelTime.QuadPart, list[0] ? L",\"ProcessList\":" : L"", list);
    complete(op, S_OK, doc);
    free(doc);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsSetComputeSystemCallback(sys_t *s, UINT32 options, void *ctx, event_callback cb)
{
    (void)options;
    s->cb = cb;
    s->ctx = ctx;
    return S_OK;
}

/* std_pipe makes a pipe whose overlapped server end is the caller's and
 * whose client end, inheritable, the child's. */
static BOOL std_pipe(BOOL child_reads, HANDLE *caller, HANDLE *child)
{
    WCHAR name[128];
    SECURITY_ATTRIBUTES sa = {sizeof(sa), NULL, TRUE};
    swprintf(name, 128, L"\\\\.\\pipe\\standin-hcs-%lu-%ld", GetCurrentProcessId(), InterlockedIncrement(&pipe_seq));
    *caller = CreateNamedPipeW(name, (child_reads ? PIPE_ACCESS_OUTBOUND : PIPE_ACCESS_INBOUND) | FILE_FLAG_OVERLAPPED,
                               PIPE_TYPE_BYTE | PIPE_WAIT, 1, 65536, 65536, 0, NULL);
    if (*caller == INVALID_HANDLE_VALUE)
        return FALSE;
    *child = CreateFileW(name, child_reads ? GENERIC_READ : GENERIC_WRITE, 0, &sa, OPEN_EXISTING, 0, NULL);
    return *child != INVALID_HANDLE_VALUE;
}

static DWORD WINAPI watch_process(void *arg)
{
    process_t *p = arg;
    DWORD code = 0;
    WCHAR data[128];
    WaitForSingleObject(p->pi.hProcess, INFINITE);
    GetExitCodeProcess(p->pi.hProcess, &code);
    WaitForSingleObject(p->callback_set, INFINITE);
    swprintf(data, 128, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu}", p->pi.dwProcessId, code);
    notify(p->cb, p->ctx, EVENT_PROCESS_EXITED, data);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsCreateProcess(sys_t *s, PCWSTR params, op_t *op, const void *sd, process_t **out)
{
    static WCHAR line[32768], rewritten[32768], dir[MAX_PATH], wd[MAX_PATH];
    HANDLE caller[3] = {NULL, NULL, NULL}, child[3] = {NULL, NULL, NULL};
    STARTUPINFOW si = {sizeof(si)};
    process_t *p = calloc(1, sizeof(process_t));
    WCHAR *env;
    BOOL ok;
    (void)sd;
    *out = NULL;
    if (!json_string(params, L"CommandLine", line, 32768))
        line[0] = 0;
    EnterCriticalSection(&lock);
    container_path(s, line, rewritten, 32768);
    with_program(s, rewritten, line, 32768);
    dir[0] = 0;
    if (json_string(params, L"WorkingDirectory", wd, MAX_PATH))
        container_path(s, wd, dir, MAX_PATH);
    if (!dir[0])
        wcscpy(dir, s->volume);
    if ((json_true(params, L"CreateStdInPipe") && !std_pipe(TRUE, &caller[0], &child[0])) ||
        (json_true(params, L"CreateStdOutPipe") && !std_pipe(FALSE, &caller[1], &child[1])) ||
        (json_true(params, L"CreateStdErrPipe") && !std_pipe(FALSE, &caller[2], &child[2]))) {
        LeaveCriticalSection(&lock);
        return HRESULT_FROM_WIN32(GetLastError());
    }
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = child[0];
    si.hStdOutput = child[1];
    si.hStdError = child[2];
    env = environment(params);
    ok = CreateProcessW(NULL, line, NULL, NULL, TRUE, CREATE_SUSPENDED | CREATE_UNICODE_ENVIRONMENT,
                        env, dir, &si, &p->pi);
    free(env);
    for (int i = 0; i < 3; i++)
        if (child[i])
            CloseHandle(child[i]);
    if (!ok) {
        DWORD err = GetLastError();
        WCHAR msg[1024];
        LeaveCriticalSection(&lock);
        for (int i = 0; i < 3; i++)
            if (caller[i])
                CloseHandle(caller[i]);
        swprintf(msg, 1024, L"{\"Error\":%ld,\"ErrorMessage\":\"CreateProcess failed in the container\"}", (long)HRESULT_FROM_WIN32(err));
        complete(op, HRESULT_FROM_WIN32(err), msg);
        free(p);
        return S_OK;
    }
    AssignProcessToJobObject(s->job, p->pi.hProcess);
    ResumeThread(p->pi.hThread);
    keep_process_document(s, p->pi.dwProcessId, params);
    p->sys = s;
    p->callback_set = CreateEventW(NULL, TRUE, FALSE, NULL);
    if (s->nprocesses < 256)
        s->processes[s->nprocesses++] = p;
    LeaveCriticalSection(&lock);
    CloseHandle(CreateThread(NULL, 0, watch_process, p, 0, NULL));
    op->info.ProcessId = p->pi.dwProcessId;
    op->info.StdInput = caller[0];
    op->info.StdOutput = caller[1];
    op->info.StdError = caller[2];
    *out = p;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenProcess(sys_t *s, DWORD pid, DWORD access, process_t **out)
{
    LONG i;
    (void)access;
    for (i = 0; i < s->nprocesses; i++)
        if (s->processes[i]->pi.dwProcessId == pid && WaitForSingleObject(s->processes[i]->pi.hProcess, 0) != WAIT_OBJECT_0) {
            *out = s->processes[i];
            return S_OK;
        }
    return HCS_E_PROCESS_NOT_FOUND;
}

/* The pipes were handed over at create, once. */
__declspec(dllexport) HRESULT WINAPI HcsGetProcessInfo(process_t *p, op_t *op)
{
    op->info.ProcessId = p->pi.dwProcessId;
    op->info.StdInput = op->info.StdOutput = op->info.StdError = INVALID_HANDLE_VALUE;
    complete(op, S_OK, NULL);
    return S_OK;
}

/* Processes stay while their system does. */
__declspec(dllexport) void WINAPI HcsCloseProcess(process_t *p) { (void)p; }

__declspec(dllexport) HRESULT WINAPI HcsSetProcessCallback(process_t *p, UINT32 options, void *ctx, event_callback cb)
{
    (void)options;
    p->cb = cb;
    p->ctx = ctx;
    SetEvent(p->callback_set);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetProcessProperties(process_t *p, op_t *op, PCWSTR query)
{
    WCHAR doc[128];
    DWORD code = 0;
    BOOL done = WaitForSingleObject(p->pi.hProcess, 0) == WAIT_OBJECT_0;
    (void)query;
    GetExitCodeProcess(p->pi.hProcess, &code);
    swprintf(doc, 128, L"{\"ProcessId\":%lu,\"Exited\":%ls,\"ExitCode\":%lu}", p->pi.dwProcessId, done ? L"true" : L"false", done ? code : 0);
    complete(op, S_OK, doc);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsSignalProcess(process_t *p, op_t *op, PCWSTR options)
{
    WCHAR sig[32] = L"";
    DWORD event = CTRL_C_EVENT;
    json_string(options, L"Signal", sig, 32);
    if (!wcscmp(sig, L"CtrlBreak"))
        event = CTRL_BREAK_EVENT;
    else if (!wcscmp(sig, L"CtrlClose"))
        event = CTRL_CLOSE_EVENT;
    else if (!wcscmp(sig, L"CtrlLogOff"))
        event = CTRL_LOGOFF_EVENT;
    else if (!wcscmp(sig, L"CtrlShutdown"))
        event = CTRL_SHUTDOWN_EVENT;
    ctrl_event(p->pi.hProcess, event);
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateProcess(process_t *p, op_t *op, PCWSTR options)
{
    (void)options;
    TerminateProcess(p->pi.hProcess, 1);
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyProcess(process_t *p, op_t *op, PCWSTR settings)
{
    (void)p;
    (void)settings;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyServiceSettings(PCWSTR settings, PWSTR *result)
{
    (void)settings;
    *result = NULL;
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetServiceProperties(PCWSTR query, PWSTR *result)
{
    const WCHAR *doc = L"{\"Properties\":[]}";
    size_t n = (wcslen(doc) + 1) * sizeof(WCHAR);
    (void)query;
    *result = LocalAlloc(LMEM_FIXED, n);
    memcpy(*result, doc, n);
    return S_OK;
}
