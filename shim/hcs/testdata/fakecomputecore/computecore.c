/*
 * A stand-in for computecore.dll, for winproc's binding test under Wine
 * (shim/hcs binding_linux_test.go builds it with MinGW;
 * TestComputecoreBinding in hcs_windows_test.go loads it). It answers the
 * functions the binding calls with HCS's signatures (computecore.h) and
 * behaviour as far as the binding depends on it: operations complete on a
 * thread of their own, results are LocalAlloc'ed for the caller to free,
 * notifications come on other threads, and a process's stdout is an
 * overlapped named pipe. It knows the systems "c1" (created), "exists"
 * (already exists) and nothing else ("missing" is not found).
 */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

#define HCS_E_SYSTEM_NOT_FOUND      ((HRESULT)0x8037010EL)
#define HCS_E_SYSTEM_ALREADY_EXISTS ((HRESULT)0x8037010FL)
#define HCS_E_OPERATION_TIMEOUT     ((HRESULT)0x80370118L)

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
} sys_t;

typedef struct {
    event_callback cb;
    void *ctx;
    HANDLE stdout_server;
    DWORD exit_code;
} proc_t;

static WCHAR *dup_w(const WCHAR *s) {
    size_t n = s ? wcslen(s) : 0;
    WCHAR *d = malloc((n + 1) * sizeof(WCHAR));
    if (s) memcpy(d, s, n * sizeof(WCHAR));
    d[n] = 0;
    return d;
}

static DWORD WINAPI complete_later(void *arg) {
    op_t *op = arg;
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
    return op;
}

__declspec(dllexport) void WINAPI HcsCloseOperation(op_t *op) {
    if (op->pending) WaitForSingleObject(op->done, INFINITE);
    CloseHandle(op->done);
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
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsCreateComputeSystem(PCWSTR id, PCWSTR config, op_t *op, const void *sd, sys_t **sys) {
    if (wcscmp(id, L"exists") == 0) {
        *sys = NULL;
        complete(op, HCS_E_SYSTEM_ALREADY_EXISTS, L"{\"Error\":-2143354609,\"ErrorMessage\":\"fake: a compute system exists\"}");
        return S_OK;
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

__declspec(dllexport) HRESULT WINAPI HcsStartComputeSystem(sys_t *s, op_t *op, PCWSTR options) {
    complete(op, S_OK, NULL);
    return S_OK;
}

typedef struct {
    event_callback cb;
    void *ctx;
    UINT32 type;
    WCHAR *data;
} notify_t;

static DWORD WINAPI notify_thread(void *arg) {
    notify_t *n = arg;
    Sleep(20);
    HCS_EVENT ev = {n->type, n->data, NULL};
    n->cb(&ev, n->ctx);
    free(n->data);
    free(n);
    return 0;
}

/* notify calls cb from a thread of its own, as HCS does. */
static void notify(event_callback cb, void *ctx, UINT32 type, const WCHAR *data) {
    if (!cb) return;
    notify_t *n = calloc(1, sizeof(notify_t));
    n->cb = cb; n->ctx = ctx; n->type = type; n->data = dup_w(data);
    CloseHandle(CreateThread(NULL, 0, notify_thread, n, 0, NULL));
}

static HRESULT stop(sys_t *s, op_t *op) {
    complete(op, S_OK, NULL);
    notify(s->cb, s->ctx, 0x00000001, L"{\"Status\":0,\"ExitType\":\"GracefulExit\"}");
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsShutDownComputeSystem(sys_t *s, op_t *op, PCWSTR options) { return stop(s, op); }
__declspec(dllexport) HRESULT WINAPI HcsTerminateComputeSystem(sys_t *s, op_t *op, PCWSTR options) { return stop(s, op); }

__declspec(dllexport) HRESULT WINAPI HcsModifyComputeSystem(sys_t *s, op_t *op, PCWSTR config, HANDLE identity) {
    /* The request comes back as the result, for the test to compare. */
    complete(op, S_OK, config);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetComputeSystemProperties(sys_t *s, op_t *op, PCWSTR query) {
    /* The system's id, its creation document and the query come back. */
    size_t n = wcslen(s->id) + wcslen(s->config) + (query ? wcslen(query) : 0) + 256;
    WCHAR *doc = malloc(n * sizeof(WCHAR));
    _snwprintf(doc, n, L"{\"Id\":\"%ls\",\"State\":\"Running\",\"Echo\":%ls,\"Query\":%ls,"
        L"\"Statistics\":{\"Uptime100ns\":50,\"Processor\":{\"TotalRuntime100ns\":7},\"Memory\":{\"MemoryUsageCommitBytes\":4096}}}",
        s->id, s->config, query && *query ? query : L"null");
    complete(op, S_OK, doc);
    free(doc);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsSetComputeSystemCallback(sys_t *s, UINT32 options, void *ctx, event_callback cb) {
    s->cb = cb;
    s->ctx = ctx;
    return S_OK;
}

static volatile LONG pipe_seq;

__declspec(dllexport) HRESULT WINAPI HcsCreateProcess(sys_t *s, PCWSTR params, op_t *op, const void *sd, proc_t **proc) {
    proc_t *p = calloc(1, sizeof(proc_t));
    p->exit_code = 3;
    WCHAR name[128];
    _snwprintf(name, 128, L"\\\\.\\pipe\\fakecomputecore-%lu-%ld", GetCurrentProcessId(), InterlockedIncrement(&pipe_seq));
    p->stdout_server = CreateNamedPipeW(name, PIPE_ACCESS_OUTBOUND | FILE_FLAG_OVERLAPPED, PIPE_TYPE_BYTE | PIPE_WAIT, 1, 4096, 4096, 0, NULL);
    HANDLE client = CreateFileW(name, GENERIC_READ, 0, NULL, OPEN_EXISTING, FILE_FLAG_OVERLAPPED, NULL);
    if (p->stdout_server == INVALID_HANDLE_VALUE || client == INVALID_HANDLE_VALUE) return HRESULT_FROM_WIN32(GetLastError());
    op->info.ProcessId = 4242;
    op->info.StdOutput = client;
    *proc = p;
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) void WINAPI HcsCloseProcess(proc_t *p) {
    if (p->stdout_server) CloseHandle(p->stdout_server);
    free(p);
}

static DWORD WINAPI run_process(void *arg) {
    proc_t *p = arg;
    const char msg[] = "hello from the fake\r\n";
    OVERLAPPED ov = {0};
    ov.hEvent = CreateEventW(NULL, TRUE, FALSE, NULL);
    DWORD n;
    if (!WriteFile(p->stdout_server, msg, sizeof(msg) - 1, &n, &ov) && GetLastError() == ERROR_IO_PENDING)
        GetOverlappedResult(p->stdout_server, &ov, &n, TRUE);
    CloseHandle(ov.hEvent);
    FlushFileBuffers(p->stdout_server);
    CloseHandle(p->stdout_server);
    p->stdout_server = NULL;
    WCHAR data[128];
    _snwprintf(data, 128, L"{\"ProcessId\":4242,\"Exited\":true,\"ExitCode\":%lu}", p->exit_code);
    notify(p->cb, p->ctx, 0x00010000, data);
    return 0;
}

__declspec(dllexport) HRESULT WINAPI HcsSetProcessCallback(proc_t *p, UINT32 options, void *ctx, event_callback cb) {
    p->cb = cb;
    p->ctx = ctx;
    /* The process runs once someone listens for its exit. */
    CloseHandle(CreateThread(NULL, 0, run_process, p, 0, NULL));
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsGetProcessProperties(proc_t *p, op_t *op, PCWSTR query) {
    complete(op, S_OK, L"{\"ProcessId\":4242,\"Exited\":false}");
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsSignalProcess(proc_t *p, op_t *op, PCWSTR options) {
    /* The options come back as the result. */
    complete(op, S_OK, options);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateProcess(proc_t *p, op_t *op, PCWSTR options) {
    complete(op, S_OK, NULL);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcsModifyProcess(proc_t *p, op_t *op, PCWSTR settings) {
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
