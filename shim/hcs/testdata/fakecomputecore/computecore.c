/*
 * A stand-in for computecore.dll, for winproc's binding test under Wine
 * (shim/hcs binding_linux_test.go builds it with MinGW;
 * TestComputecoreBinding in hcs_windows_test.go loads it). It answers the
 * functions the binding calls with HCS's signatures (computecore.h) and
 * behaviour as far as the binding depends on it: operations complete on a
 * thread of their own, results are LocalAlloc'ed for the caller to free,
 * notifications come on other threads, and a process's stdout is an
 * overlapped named pipe. It knows the systems "c1" (created), "exists"
 * (already exists) and nothing else ("missing" is not found); it lists
 * "c1" and "foreign" (HcsEnumerateComputeSystems).
 *
 * Processes behave by their command line: "app.exe" writes a line and
 * exits 3; "crash.exe" exits with STATUS_CONTROL_C_EXIT (0xC000013A);
 * "hang.exe" runs until terminated, and a console event sent to it holds
 * its call, and every later call on the same handle, until it exits (HCS
 * serializes the calls on one process handle); "spurious.exe" is made
 * but its create's wait fails with E_INVALIDARG, and HcsGetProcessInfo
 * gives its pipes.
 *
 * Faults, by the system's id: "fail-start..." fails its start with
 * HRESULT_FROM_WIN32(ERROR_TIMEOUT) (HCS giving up, 0x800705B4);
 * "stall-start..." starts only when the start is cancelled (then with
 * HCS_E_OPERATION_TIMEOUT); "gone-..." has stopped without a notification:
 * its terminate answers HCS_E_SYSTEM_NOT_FOUND and its properties say
 * Stopped; "disconnect-..." is refused by the create call with
 * HCS_E_SERVICE_DISCONNECT; "exit-in-start-..." exits during its start
 * (HCS_E_TERMINATED_DURING_START, from the operation and in the exit
 * notification's status); "denied-once-..." refuses its first terminate
 * with E_ACCESSDENIED; "invalid-..." answers a terminate after its stop
 * with HCS_E_INVALID_STATE; "twice-..." notifies its stop twice;
 * "late-..." notifies it 300 ms late, after the caller closed its handle;
 * "lost-..." never notifies it, and only its properties say Stopped.
 * Processes "noexit.exe" (whose exit, once killed, is never notified: its
 * properties say it exited) and "twice.exe" (whose exit is notified
 * twice, the second time with another code).
 *
 * It implements the documented contract of computecore.h as the binding
 * uses it (operations, callbacks, HCS_PROCESS_INFORMATION, LocalAlloc'ed
 * results, per-handle serialization of a process's calls). It leaves
 * unproven what only HCS does: whether HCS accepts the documents and
 * requests, its own timing and order of completions and notifications,
 * and the containers themselves (shim/hcs/MAPPING.md).
 */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

#define HCS_E_SYSTEM_NOT_FOUND      ((HRESULT)0x8037010EL)
#define HCS_E_SYSTEM_ALREADY_EXISTS ((HRESULT)0x8037010FL)
#define HCS_E_OPERATION_TIMEOUT     ((HRESULT)0x80370118L)
#define HCS_E_PROCESS_NOT_FOUND     HRESULT_FROM_WIN32(ERROR_NOT_FOUND)
#define HCS_E_TERMINATED_DURING_START ((HRESULT)0x80370100L)
#define HCS_E_INVALID_STATE         ((HRESULT)0x80370105L)
#define HCS_E_SERVICE_DISCONNECT    ((HRESULT)0x8037011EL)

typedef void (CALLBACK *event_callback)(void *event, void *context);

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
    HANDLE after; /* completes only once this is set, when not NULL */
    LONG pending; /* complete was called */
    HRESULT hr;
    WCHAR *result;
    HCS_PROCESS_INFORMATION info;
    DWORD delay_ms;
} op_t;

typedef struct {
    WCHAR id[256];
    WCHAR *config;
    event_callback cb;
    void *ctx;
    int stopped;     /* a stop completed */
    LONG terminates; /* terminate calls made */
} sys_t;

/* fault tells whether the system's id starts with prefix. */
static int fault(const sys_t *s, const WCHAR *prefix) {
    return wcsncmp(s->id, prefix, wcslen(prefix)) == 0;
}

enum { APP, CRASH, HANG, SPURIOUS, NOEXIT, TWICE };

/* A process; its handles are proc_t. */
typedef struct {
    DWORD pid;
    int kind;
    DWORD exit_code;
    HANDLE exited; /* set when it has exited */
    HANDLE stdout_server;
    HANDLE stdout_client; /* for HcsGetProcessInfo, once */
    event_callback cb;
    void *ctx;
} process_t;

typedef struct {
    process_t *p;
    HANDLE free; /* set while no call holds the handle */
} proc_t;

static process_t *processes[64];
static volatile LONG nprocesses;

static WCHAR *dup_w(const WCHAR *s) {
    size_t n = s ? wcslen(s) : 0;
    WCHAR *d = malloc((n + 1) * sizeof(WCHAR));
    if (s) memcpy(d, s, n * sizeof(WCHAR));
    d[n] = 0;
    return d;
}

static DWORD WINAPI complete_later(void *arg) {
    op_t *op = arg;
    if (op->after) {
        HANDLE hs[2] = {op->after, op->canceled};
        if (WaitForMultipleObjects(2, hs, FALSE, INFINITE) == WAIT_OBJECT_0 + 1) {
            op->hr = HCS_E_OPERATION_TIMEOUT;
            SetEvent(op->done);
            return 0;
        }
    }
    Sleep(op->delay_ms);
    SetEvent(op->done);
    return 0;
}

/* complete finishes op on a thread of its own, with hr and result. */
static void complete(op_t *op, HRESULT hr, const WCHAR *result) {
    op->hr = hr;
    op->result = result ? dup_w(result) : NULL;
    op->delay_ms = 5;
    op->pending = 1;
    CloseHandle(CreateThread(NULL, 0, complete_later, op, 0, NULL));
}

static HRESULT take_result(op_t *op, PWSTR *doc) {
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

__declspec(dllexport) void *WINAPI HcsCreateOperation(const void *context, void *callback) {
    op_t *op = calloc(1, sizeof(op_t));
    op->done = CreateEventW(NULL, TRUE, FALSE, NULL);
    op->canceled = CreateEventW(NULL, TRUE, FALSE, NULL);
    return op;
}

__declspec(dllexport) void WINAPI HcsCloseOperation(op_t *op) {
    if (op->pending) WaitForSingleObject(op->done, INFINITE);
    CloseHandle(op->done);
    CloseHandle(op->canceled);
    free(op->result);
    free(op);
}

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResult(op_t *op, DWORD timeout, PWSTR *doc) {
    if (WaitForSingleObject(op->done, timeout) != WAIT_OBJECT_0) return HCS_E_OPERATION_TIMEOUT;
    return take_result(op, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResultAndProcessInfo(op_t *op, DWORD timeout, HCS_PROCESS_INFORMATION *info, PWSTR *doc) {
    if (WaitForSingleObject(op->done, timeout) != WAIT_OBJECT_0) return HCS_E_OPERATION_TIMEOUT;
    *info = op->info;
    return take_result(op, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsGetOperationResult(op_t *op, PWSTR *doc) {
    return take_result(op, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsCancelOperation(op_t *op) {
    SetEvent(op->canceled);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsCreateComputeSystem(PCWSTR id, PCWSTR config, op_t *op, const void *sd, sys_t **sys) {
    if (wcscmp(id, L"exists") == 0) {
        *sys = NULL;
        complete(op, HCS_E_SYSTEM_ALREADY_EXISTS, L"{\"Error\":-2143354609,\"ErrorMessage\":\"fake: a compute system exists\"}");
        return S_OK;
    }
    if (wcsncmp(id, L"disconnect-", 11) == 0) {
        *sys = NULL;
        return HCS_E_SERVICE_DISCONNECT;
    }
    sys_t *s = calloc(1, sizeof(sys_t));
    wcsncpy(s->id, id, 255);
    s->config = dup_w(config);
    *sys = s;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenComputeSystem(PCWSTR id, DWORD access, sys_t **sys) {
    if (wcscmp(id, L"c1") != 0) return HCS_E_SYSTEM_NOT_FOUND;
    sys_t *s = calloc(1, sizeof(sys_t));
    wcsncpy(s->id, id, 255);
    s->config = dup_w(L"{}");
    *sys = s;
    return S_OK;
}

__declspec(dllexport) void WINAPI HcsCloseComputeSystem(sys_t *s) {
    free(s->config);
    free(s);
}

static void notify(event_callback cb, void *ctx, UINT32 type, const WCHAR *data);

__declspec(dllexport) HRESULT WINAPI HcsStartComputeSystem(sys_t *s, op_t *op, PCWSTR options) {
    if (fault(s, L"exit-in-start-")) {
        s->stopped = 1;
        complete(op, HCS_E_TERMINATED_DURING_START, L"{\"Error\":-2143878912,\"ErrorMessage\":\"The compute system exited unexpectedly while starting.\"}");
        notify(s->cb, s->ctx, 0x00000001, L"{\"Status\":-2143878912,\"ExitType\":\"UnexpectedExit\"}");
        return S_OK;
    }
    if (wcsncmp(s->id, L"fail-start", 10) == 0) {
        /* HCS gave up itself: ERROR_TIMEOUT as an HRESULT. */
        complete(op, HRESULT_FROM_WIN32(ERROR_TIMEOUT), L"{\"Error\":-2147023436,\"ErrorMessage\":\"This operation returned because the timeout period expired.\"}");
        return S_OK;
    }
    if (wcsncmp(s->id, L"stall-start", 11) == 0) {
        /* Ends only when cancelled. */
        op->after = CreateEventW(NULL, TRUE, FALSE, NULL);
    }
    complete(op, S_OK, NULL);
    return S_OK;
}

typedef struct {
    event_callback cb;
    void *ctx;
    UINT32 type;
    WCHAR *data;
    WCHAR *again; /* a second notification, after the first, or NULL */
    DWORD delay_ms;
} notify_t;

static DWORD WINAPI notify_thread(void *arg) {
    notify_t *n = arg;
    Sleep(n->delay_ms);
    HCS_EVENT ev = {n->type, n->data, NULL};
    n->cb(&ev, n->ctx);
    if (n->again) {
        Sleep(20);
        HCS_EVENT ev2 = {n->type, n->again, NULL};
        n->cb(&ev2, n->ctx);
        free(n->again);
    }
    free(n->data);
    free(n);
    return 0;
}

/* notify_after calls cb from a thread of its own, as HCS does, after
 * delay_ms, with data and then, if not NULL, again. */
static void notify_after(event_callback cb, void *ctx, UINT32 type, const WCHAR *data, const WCHAR *again, DWORD delay_ms) {
    if (!cb) return;
    notify_t *n = calloc(1, sizeof(notify_t));
    n->cb = cb; n->ctx = ctx; n->type = type; n->data = dup_w(data); n->delay_ms = delay_ms;
    n->again = again ? dup_w(again) : NULL;
    CloseHandle(CreateThread(NULL, 0, notify_thread, n, 0, NULL));
}

static void notify(event_callback cb, void *ctx, UINT32 type, const WCHAR *data) {
    notify_after(cb, ctx, type, data, NULL, 20);
}

static HRESULT stop(sys_t *s, op_t *op) {
    static const WCHAR exited[] = L"{\"Status\":0,\"ExitType\":\"GracefulExit\"}";
    if (s->stopped && fault(s, L"invalid-")) return HCS_E_INVALID_STATE;
    s->stopped = 1;
    complete(op, S_OK, NULL);
    if (fault(s, L"lost-")) return S_OK;
    notify_after(s->cb, s->ctx, 0x00000001, exited, fault(s, L"twice-") ? exited : NULL, fault(s, L"late-") ? 300 : 20);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsShutDownComputeSystem(sys_t *s, op_t *op, PCWSTR options) { return stop(s, op); }
__declspec(dllexport) HRESULT WINAPI HcsTerminateComputeSystem(sys_t *s, op_t *op, PCWSTR options) {
    if (wcsncmp(s->id, L"gone-", 5) == 0) {
        /* It stopped, and its exit notification was lost: the call
         * itself fails. */
        return HCS_E_SYSTEM_NOT_FOUND;
    }
    if (fault(s, L"denied-once-") && InterlockedIncrement(&s->terminates) == 1) return E_ACCESSDENIED;
    return stop(s, op);
}

__declspec(dllexport) HRESULT WINAPI HcsModifyComputeSystem(sys_t *s, op_t *op, PCWSTR config, HANDLE identity) {
    /* The request comes back as the result, for the test to compare. */
    complete(op, S_OK, config);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetComputeSystemProperties(sys_t *s, op_t *op, PCWSTR query) {
    /* The system's id, its creation document and the query come back. */
    size_t n = wcslen(s->id) + wcslen(s->config) + (query ? wcslen(query) : 0) + 256;
    WCHAR *doc = malloc(n * sizeof(WCHAR));
    _snwprintf(doc, n, L"{\"Id\":\"%ls\",\"State\":\"%ls\",\"Echo\":%ls,\"Query\":%ls,"
        L"\"Statistics\":{\"Uptime100ns\":50,\"Processor\":{\"TotalRuntime100ns\":7},\"Memory\":{\"MemoryUsageCommitBytes\":4096}}}",
        s->id, fault(s, L"gone-") || s->stopped ? L"Stopped" : L"Running", s->config, query && *query ? query : L"null");
    complete(op, S_OK, doc);
    free(doc);
    return S_OK;
}

/* HcsEnumerateComputeSystems knows "c1" of owner winproc and "foreign" of
 * owner docker, and lists those whose owner the query names (a query
 * without owners lists both). */
__declspec(dllexport) HRESULT WINAPI HcsEnumerateComputeSystems(PCWSTR query, op_t *op) {
    int any = !query || !wcsstr(query, L"\"Owners\"");
    WCHAR doc[256] = L"[";
    if (any || wcsstr(query, L"\"winproc\""))
        wcscat(doc, L"{\"Id\":\"c1\",\"Owner\":\"winproc\",\"State\":\"Running\",\"SystemType\":\"Container\"}");
    if (any || wcsstr(query, L"\"docker\"")) {
        if (doc[1]) wcscat(doc, L",");
        wcscat(doc, L"{\"Id\":\"foreign\",\"Owner\":\"docker\",\"State\":\"Running\",\"SystemType\":\"Container\"}");
    }
    wcscat(doc, L"]");
    complete(op, S_OK, doc);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsSetComputeSystemCallback(sys_t *s, UINT32 options, void *ctx, event_callback cb) {
    s->cb = cb;
    s->ctx = ctx;
    return S_OK;
}

static volatile LONG pipe_seq;

static proc_t *new_handle(process_t *p) {
    proc_t *h = calloc(1, sizeof(proc_t));
    h->p = p;
    h->free = CreateEventW(NULL, TRUE, TRUE, NULL);
    return h;
}

__declspec(dllexport) HRESULT WINAPI HcsCreateProcess(sys_t *s, PCWSTR params, op_t *op, const void *sd, proc_t **proc) {
    process_t *p = calloc(1, sizeof(process_t));
    p->kind = wcsstr(params, L"crash.exe") ? CRASH : wcsstr(params, L"hang.exe") ? HANG : wcsstr(params, L"spurious.exe") ? SPURIOUS
        : wcsstr(params, L"noexit.exe") ? NOEXIT : wcsstr(params, L"twice.exe") ? TWICE : APP;
    p->pid = 4242 + p->kind;
    p->exit_code = p->kind == CRASH ? 0xC000013A : 3;
    p->exited = CreateEventW(NULL, TRUE, FALSE, NULL);
    WCHAR name[128];
    _snwprintf(name, 128, L"\\\\.\\pipe\\fakecomputecore-%lu-%ld", GetCurrentProcessId(), InterlockedIncrement(&pipe_seq));
    p->stdout_server = CreateNamedPipeW(name, PIPE_ACCESS_OUTBOUND | FILE_FLAG_OVERLAPPED, PIPE_TYPE_BYTE | PIPE_WAIT, 1, 4096, 4096, 0, NULL);
    HANDLE client = CreateFileW(name, GENERIC_READ, 0, NULL, OPEN_EXISTING, FILE_FLAG_OVERLAPPED, NULL);
    if (p->stdout_server == INVALID_HANDLE_VALUE || client == INVALID_HANDLE_VALUE) return HRESULT_FROM_WIN32(GetLastError());
    processes[InterlockedIncrement(&nprocesses) - 1] = p;
    *proc = new_handle(p);
    if (p->kind == SPURIOUS) {
        /* Made, but the wait fails and hands over nothing. */
        p->stdout_client = client;
        complete(op, E_INVALIDARG, NULL);
        return S_OK;
    }
    op->info.ProcessId = p->pid;
    op->info.StdOutput = client;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenProcess(sys_t *s, DWORD pid, DWORD access, proc_t **proc) {
    for (LONG i = 0; i < nprocesses; i++) {
        process_t *p = processes[i];
        if (p->pid == pid && WaitForSingleObject(p->exited, 0) != WAIT_OBJECT_0) {
            *proc = new_handle(p);
            return S_OK;
        }
    }
    return HCS_E_PROCESS_NOT_FOUND;
}

__declspec(dllexport) HRESULT WINAPI HcsGetProcessInfo(proc_t *h, op_t *op) {
    process_t *p = h->p;
    op->info.ProcessId = p->pid;
    op->info.StdInput = INVALID_HANDLE_VALUE;
    op->info.StdError = INVALID_HANDLE_VALUE;
    op->info.StdOutput = p->stdout_client ? p->stdout_client : INVALID_HANDLE_VALUE;
    p->stdout_client = NULL;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) void WINAPI HcsCloseProcess(proc_t *h) {
    CloseHandle(h->free);
    free(h);
}

static DWORD WINAPI run_process(void *arg) {
    process_t *p = arg;
    if (p->kind == HANG || p->kind == NOEXIT) {
        WaitForSingleObject(p->exited, INFINITE);
    } else if (p->kind == APP || p->kind == SPURIOUS) {
        const char msg[] = "hello from the fake\r\n";
        OVERLAPPED ov = {0};
        ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
        DWORD n;
        if (!WriteFile(p->stdout_server, msg, sizeof(msg) - 1, &n, &ov) && GetLastError() == ERROR_IO_PENDING)
            GetOverlappedResult(p->stdout_server, &ov, &n, TRUE);
        CloseHandle(ov.hEvent);
        FlushFileBuffers(p->stdout_server);
    }
    CloseHandle(p->stdout_server);
    p->stdout_server = NULL;
    SetEvent(p->exited);
    WCHAR data[128];
    _snwprintf(data, 128, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu}", p->pid, p->exit_code);
    if (p->kind == NOEXIT) return 0;
    WCHAR again[128];
    _snwprintf(again, 128, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":99}", p->pid);
    notify_after(p->cb, p->ctx, 0x00010000, data, p->kind == TWICE ? again : NULL, 20);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsSetProcessCallback(proc_t *h, UINT32 options, void *ctx, event_callback cb) {
    h->p->cb = cb;
    h->p->ctx = ctx;
    /* The process runs once someone listens for its exit. */
    CloseHandle(CreateThread(NULL, 0, run_process, h->p, 0, NULL));
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetProcessProperties(proc_t *h, op_t *op, PCWSTR query) {
    WCHAR doc[128];
    process_t *p = h->p;
    if (WaitForSingleObject(p->exited, 0) == WAIT_OBJECT_0)
        _snwprintf(doc, 128, L"{\"ProcessId\":%lu,\"Exited\":true,\"ExitCode\":%lu}", p->pid, p->exit_code);
    else
        _snwprintf(doc, 128, L"{\"ProcessId\":%lu,\"Exited\":false}", p->pid);
    complete(op, S_OK, doc);
    return S_OK;
}

static DWORD WINAPI hold_until_exit(void *arg) {
    proc_t *h = arg;
    WaitForSingleObject(h->p->exited, INFINITE);
    SetEvent(h->free);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsSignalProcess(proc_t *h, op_t *op, PCWSTR options) {
    if (h->p->kind == HANG) {
        /* The handler does not return: the call, and the handle, are
         * held until the process exits. */
        ResetEvent(h->free);
        CloseHandle(CreateThread(NULL, 0, hold_until_exit, h, 0, NULL));
        op->after = h->free;
    }
    /* The options come back as the result. */
    complete(op, S_OK, options);
    return S_OK;
}

/* A kill waits on its own copy of the handle's free event: the caller
 * may close the handle once the kill's operation completes, before the
 * kill has ended the process. */
typedef struct {
    process_t *p;
    HANDLE free;
} kill_t;

static DWORD WINAPI kill_later(void *arg) {
    kill_t *k = arg;
    process_t *p = k->p;
    /* Behind any call that holds this handle. */
    WaitForSingleObject(k->free, INFINITE);
    if (WaitForSingleObject(p->exited, 0) != WAIT_OBJECT_0) {
        p->exit_code = 1;
        SetEvent(p->exited);
    }
    CloseHandle(k->free);
    free(k);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateProcess(proc_t *h, op_t *op, PCWSTR options) {
    kill_t *k = calloc(1, sizeof(kill_t));
    k->p = h->p;
    DuplicateHandle(GetCurrentProcess(), h->free, GetCurrentProcess(), &k->free, 0, FALSE, DUPLICATE_SAME_ACCESS);
    CloseHandle(CreateThread(NULL, 0, kill_later, k, 0, NULL));
    op->after = h->free;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyProcess(proc_t *h, op_t *op, PCWSTR settings) {
    complete(op, S_OK, settings);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyServiceSettings(PCWSTR settings, PWSTR *result) {
    *result = NULL;
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetServiceProperties(PCWSTR query, PWSTR *result) {
    const WCHAR *doc = L"{\"Properties\":[{\"Instances\":[{\"Id\":\"c1\",\"CredentialGuard\":{\"Cookie\":\"ZmFrZQ==\",\"RpcEndpoint\":\"ep\",\"Transport\":\"LRPC\",\"CredentialSpec\":\"{}\"}}]}]}";
    size_t n = (wcslen(doc) + 1) * sizeof(WCHAR);
    *result = LocalAlloc(LMEM_FIXED, n);
    memcpy(*result, doc, n);
    return S_OK;
}
