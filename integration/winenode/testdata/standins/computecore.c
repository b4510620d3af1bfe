/*
 * A stand-in for computecore.dll (HCS) for the Windows node under Wine
 * (integration/winenode): the client half. HCS keeps compute systems in
 * its own service (vmcompute.exe), not in the caller, and so does the
 * stand-in: this DLL forwards every call over a message pipe
 * (hcsproto.h) to the stand-in HCS service (hcsservice.c,
 * computecore-service.exe next to this DLL, started on first use if it
 * is not running), which owns the job objects, processes and pipes. So a
 * system is seen by every process (HcsOpenComputeSystem,
 * HcsEnumerateComputeSystems), outlives the process that made it, and a
 * process's death closes its handles (hcsshim internal/hcs/system.go
 * OpenComputeSystem and GetComputeSystems reach systems other processes
 * made).
 *
 * What lives here, per the HCS reference (learn.microsoft.com
 * virtualization/api/hcs/reference):
 *  - operations (HcsCreateOperation): a completion callback, when given,
 *    is called once the operation completes; HcsGetOperationResult of an
 *    operation in progress answers HCS_E_OPERATION_PENDING and of one
 *    never used HCS_E_OPERATION_NOT_STARTED; HcsCloseOperation does not
 *    wait for the operation (an operation closed while in progress goes
 *    on in the service; its completion is dropped);
 *  - results are LocalAlloc'ed (the reference pages: "The caller is
 *    responsible for releasing the returned string using LocalFree");
 *  - callbacks are per handle (HcsSetComputeSystemCallback,
 *    HcsSetProcessCallback take the handle): a second handle's callback
 *    does not replace the first's; a notification is called on a thread
 *    of its own;
 *  - when the service goes away, each operation in progress completes
 *    with HCS_E_SERVICE_DISCONNECT and each handle with a callback gets
 *    HcsEventServiceDisconnect (computecore.h HCS_EVENT_TYPE).
 *
 * It leaves unproven HCS's own transport (RPC) and its security: any
 * process of the node may open any system, whatever the access asked;
 * and what HCS does with the stdio handles of an operation whose process
 * information nobody took (the stand-in closes them with the operation).
 */
#include "standin.h"
#include "hcsproto.h"
#include <stdlib.h>

#define HCS_E_OPERATION_NOT_STARTED ((HRESULT)0x80370115L)
#define HCS_E_OPERATION_PENDING ((HRESULT)0x80370117L)
#define HCS_E_OPERATION_TIMEOUT ((HRESULT)0x80370118L)
#define HCS_E_SERVICE_DISCONNECT ((HRESULT)0x8037011EL)
#define HCS_E_OPERATION_ALREADY_STARTED ((HRESULT)0x80370116L)
#define EVENT_SERVICE_DISCONNECT 0x02000000

typedef void(CALLBACK *event_callback)(void *event, void *context);
typedef void(CALLBACK *op_callback)(void *op, void *context);

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

enum { OP_NEW, OP_PENDING, OP_DONE };

typedef struct op {
    struct op *next;
    LONG state;
    BOOL closed;     /* HcsCloseOperation came first; the completion frees it */
    BOOL info_taken; /* the stdio handles are the caller's */
    HANDLE done;
    HRESULT hr;
    WCHAR *result;
    HCS_PROCESS_INFORMATION info;
    const void *ctx;
    op_callback cb;
} op_t;

typedef struct handle {
    struct handle *next;
    ULONGLONG h; /* the service's */
    event_callback cb;
    void *ctx;
} client_handle_t;

typedef struct call {
    struct call *next;
    DWORD seq;
    HANDLE done;
    hcs_msg *reply;
} call_t;

static CRITICAL_SECTION lock; /* the lists and the connection */
static CRITICAL_SECTION wlock; /* writes to the pipe */
static HANDLE pipe = INVALID_HANDLE_VALUE;
static op_t *ops;
static client_handle_t *handles;
static call_t *calls;
static DWORD seq;
static HMODULE self;

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, void *reserved)
{
    (void)reserved;
    if (reason == DLL_PROCESS_ATTACH) {
        self = inst;
        InitializeCriticalSection(&lock);
        InitializeCriticalSection(&wlock);
    }
    return TRUE;
}

static WCHAR *dup_w(const WCHAR *s)
{
    size_t n;
    WCHAR *d;
    if (!s)
        return NULL;
    n = wcslen(s) + 1;
    d = malloc(n * sizeof(WCHAR));
    memcpy(d, s, n * sizeof(WCHAR));
    return d;
}

/* -- notifications and completions, on threads of their own -- */

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
    notify_t *n = calloc(1, sizeof(notify_t));
    n->cb = cb;
    n->ctx = ctx;
    n->type = type;
    n->data = dup_w(data);
    CloseHandle(CreateThread(NULL, 0, notify_thread, n, 0, NULL));
}

static DWORD WINAPI op_callback_thread(void *arg)
{
    op_t *op = arg;
    op->cb(op, (void *)op->ctx);
    return 0;
}

/* free_op frees op and closes the stdio handles nobody took. */
static void free_op(op_t *op)
{
    HANDLE std[3] = {op->info.StdInput, op->info.StdOutput, op->info.StdError};
    for (int i = 0; i < 3 && !op->info_taken; i++)
        if (std[i])
            CloseHandle(std[i]);
    CloseHandle(op->done);
    free(op->result);
    free(op);
}

static op_t *unlink_op(op_t *op)
{
    op_t **p;
    for (p = &ops; *p; p = &(*p)->next)
        if (*p == op) {
            *p = op->next;
            return op;
        }
    return NULL;
}

/* completed records an operation's completion; an operation already
 * closed is freed (its handles, which nobody will take, closed). */
static void completed(ULONGLONG id, HRESULT hr, const WCHAR *result, const hcs_msg *m)
{
    op_t *op, *o;
    EnterCriticalSection(&lock);
    for (o = ops; o && (ULONGLONG)(ULONG_PTR)o != id; o = o->next)
        ;
    op = o;
    if (!op || op->state != OP_PENDING) {
        LeaveCriticalSection(&lock);
        for (int i = 0; i < 3; i++)
            if (m && m->std[i])
                CloseHandle((HANDLE)(ULONG_PTR)m->std[i]);
        return;
    }
    op->hr = hr;
    op->result = dup_w(result);
    if (m) {
        op->info.ProcessId = m->pid;
        op->info.StdInput = (HANDLE)(ULONG_PTR)m->std[0];
        op->info.StdOutput = (HANDLE)(ULONG_PTR)m->std[1];
        op->info.StdError = (HANDLE)(ULONG_PTR)m->std[2];
    }
    op->state = OP_DONE;
    if (op->closed) {
        unlink_op(op);
        LeaveCriticalSection(&lock);
        free_op(op);
        return;
    }
    SetEvent(op->done);
    if (op->cb)
        CloseHandle(CreateThread(NULL, 0, op_callback_thread, op, 0, NULL));
    LeaveCriticalSection(&lock);
}

/* -- the connection to the service -- */

/* disconnected ends what waited on the service that went away. */
static void disconnected(HANDLE gone)
{
    call_t *c;
    op_t *o;
    client_handle_t *h;
    ULONGLONG pending[256];
    int n = 0;
    EnterCriticalSection(&lock);
    if (pipe == gone) {
        CloseHandle(pipe);
        pipe = INVALID_HANDLE_VALUE;
    }
    for (c = calls; c; c = c->next)
        SetEvent(c->done);
    for (o = ops; o && n < 256; o = o->next)
        if (o->state == OP_PENDING)
            pending[n++] = (ULONGLONG)(ULONG_PTR)o;
    for (h = handles; h; h = h->next)
        if (h->cb)
            notify(h->cb, h->ctx, EVENT_SERVICE_DISCONNECT, NULL);
    LeaveCriticalSection(&lock);
    for (int i = 0; i < n; i++)
        completed(pending[i], HCS_E_SERVICE_DISCONNECT, NULL, NULL);
}

static void event(const hcs_msg *m, const WCHAR *data)
{
    client_handle_t *h;
    EnterCriticalSection(&lock);
    for (h = handles; h; h = h->next)
        if (h->h == m->h && h->cb)
            notify(h->cb, h->ctx, m->a, data);
    LeaveCriticalSection(&lock);
}

static DWORD WINAPI reader(void *arg)
{
    HANDLE p = arg;
    for (;;) {
        const WCHAR *s1, *s2;
        hcs_msg *m = msg_recv(p, &s1, &s2);
        call_t *c;
        if (!m)
            break;
        switch (m->kind) {
        case MSG_REPLY:
            EnterCriticalSection(&lock);
            for (c = calls; c && c->seq != m->seq; c = c->next)
                ;
            if (c) {
                c->reply = m;
                m = NULL;
                SetEvent(c->done);
            }
            LeaveCriticalSection(&lock);
            break;
        case MSG_OP_DONE:
            completed(m->op, m->hr, s1, m);
            break;
        case MSG_EVENT:
            event(m, s1);
            break;
        }
        HeapFree(GetProcessHeap(), 0, m);
    }
    disconnected(p);
    return 0;
}

/* start_service starts computecore-service.exe from this DLL's directory,
 * out of the caller's job where it may (a service is no caller's child). */
static void start_service(void)
{
    WCHAR exe[MAX_PATH], *slash;
    STARTUPINFOW si = {sizeof(si)};
    PROCESS_INFORMATION pi;
    DWORD n = GetModuleFileNameW(self, exe, MAX_PATH);
    if (n == 0 || n >= MAX_PATH || !(slash = wcsrchr(exe, L'\\')))
        return;
    wcscpy(slash + 1, HCS_SERVICE_EXE);
    if (!CreateProcessW(exe, NULL, NULL, NULL, FALSE, CREATE_BREAKAWAY_FROM_JOB | DETACHED_PROCESS, NULL, NULL, &si, &pi) &&
        !CreateProcessW(exe, NULL, NULL, NULL, FALSE, DETACHED_PROCESS, NULL, NULL, &si, &pi))
        return;
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
}

/* connect opens the service's pipe, starting the service if it is not
 * running; under lock. */
static HANDLE connect_service(void)
{
    HANDLE p = INVALID_HANDLE_VALUE;
    hcs_msg hello = {0};
    BOOL started = FALSE;
    int i;
    if (pipe != INVALID_HANDLE_VALUE)
        return pipe;
    for (i = 0; i < 400 && p == INVALID_HANDLE_VALUE; i++) {
        p = CreateFileW(HCS_SERVICE_PIPE, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, FILE_FLAG_OVERLAPPED, NULL);
        if (p != INVALID_HANDLE_VALUE)
            break;
        if (GetLastError() == ERROR_PIPE_BUSY) {
            WaitNamedPipeW(HCS_SERVICE_PIPE, 100);
            continue;
        }
        if (!started) {
            start_service();
            started = TRUE;
        }
        Sleep(50);
    }
    if (p == INVALID_HANDLE_VALUE)
        return p;
    /* The service duplicates stdio handles into this process: it is told
     * which, unanswered, before any call. */
    hello.kind = MSG_CALL;
    hello.fn = FN_HELLO;
    hello.a = GetCurrentProcessId();
    if (!msg_send(p, &hello, NULL, NULL)) {
        CloseHandle(p);
        return INVALID_HANDLE_VALUE;
    }
    pipe = p;
    CloseHandle(CreateThread(NULL, 0, reader, p, 0, NULL));
    return p;
}

/* call sends a call and waits for its reply (HeapFree it), or NULL when
 * the service is not there. */
static hcs_msg *call(DWORD fn, ULONGLONG h, const op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2)
{
    call_t c = {0};
    hcs_msg m = {0};
    HANDLE p;
    call_t **q;
    BOOL sent;
    EnterCriticalSection(&lock);
    p = connect_service();
    if (p == INVALID_HANDLE_VALUE) {
        LeaveCriticalSection(&lock);
        return NULL;
    }
    c.seq = ++seq;
    c.done = CreateEventW(NULL, TRUE, FALSE, NULL);
    c.next = calls;
    calls = &c;
    LeaveCriticalSection(&lock);
    m.kind = MSG_CALL;
    m.fn = fn;
    m.seq = c.seq;
    m.h = h;
    m.op = (ULONGLONG)(ULONG_PTR)op;
    m.a = a;
    EnterCriticalSection(&wlock);
    sent = msg_send(p, &m, s1, s2);
    LeaveCriticalSection(&wlock);
    if (sent)
        WaitForSingleObject(c.done, INFINITE);
    EnterCriticalSection(&lock);
    for (q = &calls; *q; q = &(*q)->next)
        if (*q == &c) {
            *q = c.next;
            break;
        }
    LeaveCriticalSection(&lock);
    CloseHandle(c.done);
    return c.reply;
}

/* reply_hr is a reply's HRESULT; no reply is a service that went away. */
static HRESULT reply_hr(hcs_msg *r, ULONGLONG *h)
{
    HRESULT hr;
    if (!r)
        return HCS_E_SERVICE_DISCONNECT;
    hr = r->hr;
    if (h)
        *h = r->h;
    HeapFree(GetProcessHeap(), 0, r);
    return hr;
}

/* start_op marks op in progress before its call goes out (its completion
 * may come before the reply) and back when the call failed. */
static HRESULT op_call(DWORD fn, ULONGLONG h, op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2, ULONGLONG *out)
{
    HRESULT hr;
    if (!op)
        return E_INVALIDARG;
    EnterCriticalSection(&lock);
    if (op->state != OP_NEW) {
        LeaveCriticalSection(&lock);
        return HCS_E_OPERATION_ALREADY_STARTED;
    }
    op->state = OP_PENDING;
    LeaveCriticalSection(&lock);
    hr = reply_hr(call(fn, h, op, a, s1, s2), out);
    if (FAILED(hr)) {
        EnterCriticalSection(&lock);
        if (op->state == OP_PENDING)
            op->state = OP_NEW;
        LeaveCriticalSection(&lock);
    }
    return hr;
}

static client_handle_t *new_handle(ULONGLONG h)
{
    client_handle_t *x = calloc(1, sizeof(client_handle_t));
    x->h = h;
    EnterCriticalSection(&lock);
    x->next = handles;
    handles = x;
    LeaveCriticalSection(&lock);
    return x;
}

static void close_handle(DWORD fn, client_handle_t *x)
{
    client_handle_t **p;
    if (!x)
        return;
    EnterCriticalSection(&lock);
    for (p = &handles; *p; p = &(*p)->next)
        if (*p == x) {
            *p = x->next;
            break;
        }
    LeaveCriticalSection(&lock);
    reply_hr(call(fn, x->h, NULL, 0, NULL, NULL), NULL);
    free(x);
}

static ULONGLONG hid(const client_handle_t *x) { return x ? x->h : 0; }

/* -- operations -- */

__declspec(dllexport) op_t *WINAPI HcsCreateOperation(const void *context, op_callback callback)
{
    op_t *op = calloc(1, sizeof(op_t));
    op->done = CreateEventW(NULL, TRUE, FALSE, NULL);
    op->ctx = context;
    op->cb = callback;
    EnterCriticalSection(&lock);
    op->next = ops;
    ops = op;
    LeaveCriticalSection(&lock);
    return op;
}

/* HcsCloseOperation never waits: an operation in progress is freed by its
 * completion. */
__declspec(dllexport) void WINAPI HcsCloseOperation(op_t *op)
{
    if (!op)
        return;
    EnterCriticalSection(&lock);
    if (op->state == OP_PENDING) {
        op->closed = TRUE;
        LeaveCriticalSection(&lock);
        return;
    }
    unlink_op(op);
    LeaveCriticalSection(&lock);
    free_op(op);
}

__declspec(dllexport) void *WINAPI HcsGetOperationContext(op_t *op) { return (void *)op->ctx; }

static HRESULT result_of(op_t *op, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
    if (doc)
        *doc = NULL;
    if (op->state == OP_NEW)
        return HCS_E_OPERATION_NOT_STARTED;
    if (op->state == OP_PENDING)
        return HCS_E_OPERATION_PENDING;
    if (doc && op->result) {
        size_t n = (wcslen(op->result) + 1) * sizeof(WCHAR);
        *doc = LocalAlloc(LMEM_FIXED, n);
        memcpy(*doc, op->result, n);
    }
    if (info && SUCCEEDED(op->hr)) {
        *info = op->info;
        op->info_taken = TRUE;
    }
    return op->hr;
}

static HRESULT wait_op(op_t *op, DWORD timeout, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
    if (doc)
        *doc = NULL;
    if (op->state == OP_NEW)
        return HCS_E_OPERATION_NOT_STARTED;
    if (WaitForSingleObject(op->done, timeout) != WAIT_OBJECT_0)
        return HCS_E_OPERATION_TIMEOUT;
    return result_of(op, info, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsGetOperationResult(op_t *op, PWSTR *doc) { return result_of(op, NULL, doc); }

__declspec(dllexport) HRESULT WINAPI HcsGetOperationResultAndProcessInfo(op_t *op, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
    return result_of(op, info, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResult(op_t *op, DWORD timeout, PWSTR *doc) { return wait_op(op, timeout, NULL, doc); }

__declspec(dllexport) HRESULT WINAPI HcsWaitForOperationResultAndProcessInfo(op_t *op, DWORD timeout, HCS_PROCESS_INFORMATION *info, PWSTR *doc)
{
    return wait_op(op, timeout, info, doc);
}

__declspec(dllexport) HRESULT WINAPI HcsCancelOperation(op_t *op)
{
    return reply_hr(call(FN_CANCEL, 0, op, 0, NULL, NULL), NULL);
}

/* -- compute systems -- */

__declspec(dllexport) HRESULT WINAPI HcsCreateComputeSystem(PCWSTR id, PCWSTR config, op_t *op, const void *sd, client_handle_t **out)
{
    ULONGLONG h = 0;
    HRESULT hr;
    (void)sd;
    *out = NULL;
    hr = op_call(FN_CREATE_SYSTEM, 0, op, 0, id, config, &h);
    if (SUCCEEDED(hr) && h)
        *out = new_handle(h);
    return hr;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenComputeSystem(PCWSTR id, DWORD access, client_handle_t **out)
{
    ULONGLONG h = 0;
    HRESULT hr = reply_hr(call(FN_OPEN_SYSTEM, 0, NULL, access, id, NULL), &h);
    *out = SUCCEEDED(hr) ? new_handle(h) : NULL;
    return hr;
}

__declspec(dllexport) void WINAPI HcsCloseComputeSystem(client_handle_t *s) { close_handle(FN_CLOSE_SYSTEM, s); }

__declspec(dllexport) HRESULT WINAPI HcsEnumerateComputeSystems(PCWSTR query, op_t *op)
{
    return op_call(FN_ENUMERATE, 0, op, 0, query, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsStartComputeSystem(client_handle_t *s, op_t *op, PCWSTR options)
{
    return op_call(FN_START_SYSTEM, hid(s), op, 0, options, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsShutDownComputeSystem(client_handle_t *s, op_t *op, PCWSTR options)
{
    return op_call(FN_SHUTDOWN_SYSTEM, hid(s), op, 0, options, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateComputeSystem(client_handle_t *s, op_t *op, PCWSTR options)
{
    return op_call(FN_TERMINATE_SYSTEM, hid(s), op, 0, options, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsModifyComputeSystem(client_handle_t *s, op_t *op, PCWSTR config, HANDLE identity)
{
    (void)identity;
    return op_call(FN_MODIFY_SYSTEM, hid(s), op, 0, config, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsGetComputeSystemProperties(client_handle_t *s, op_t *op, PCWSTR query)
{
    return op_call(FN_SYSTEM_PROPERTIES, hid(s), op, 0, query, NULL, NULL);
}

/* set_callback keeps the callback in this handle and tells the service
 * whether to send the handle's notifications. */
static HRESULT set_callback(DWORD fn, client_handle_t *x, void *ctx, event_callback cb)
{
    HRESULT hr;
    if (!x)
        return HRESULT_FROM_WIN32(ERROR_INVALID_HANDLE);
    EnterCriticalSection(&lock);
    x->cb = cb;
    x->ctx = ctx;
    LeaveCriticalSection(&lock);
    hr = reply_hr(call(fn, x->h, NULL, cb != NULL, NULL, NULL), NULL);
    if (FAILED(hr)) {
        EnterCriticalSection(&lock);
        x->cb = NULL;
        LeaveCriticalSection(&lock);
    }
    return hr;
}

__declspec(dllexport) HRESULT WINAPI HcsSetComputeSystemCallback(client_handle_t *s, UINT32 options, void *ctx, event_callback cb)
{
    (void)options;
    return set_callback(FN_SYSTEM_CALLBACK, s, ctx, cb);
}

/* -- processes -- */

__declspec(dllexport) HRESULT WINAPI HcsCreateProcess(client_handle_t *s, PCWSTR params, op_t *op, const void *sd, client_handle_t **out)
{
    ULONGLONG h = 0;
    HRESULT hr;
    (void)sd;
    *out = NULL;
    hr = op_call(FN_CREATE_PROCESS, hid(s), op, 0, params, NULL, &h);
    if (SUCCEEDED(hr) && h)
        *out = new_handle(h);
    return hr;
}

__declspec(dllexport) HRESULT WINAPI HcsOpenProcess(client_handle_t *s, DWORD pid, DWORD access, client_handle_t **out)
{
    ULONGLONG h = 0;
    HRESULT hr;
    (void)access;
    hr = reply_hr(call(FN_OPEN_PROCESS, hid(s), NULL, pid, NULL, NULL), &h);
    *out = SUCCEEDED(hr) ? new_handle(h) : NULL;
    return hr;
}

__declspec(dllexport) void WINAPI HcsCloseProcess(client_handle_t *p) { close_handle(FN_CLOSE_PROCESS, p); }

__declspec(dllexport) HRESULT WINAPI HcsGetProcessInfo(client_handle_t *p, op_t *op)
{
    return op_call(FN_PROCESS_INFO, hid(p), op, 0, NULL, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsSignalProcess(client_handle_t *p, op_t *op, PCWSTR options)
{
    return op_call(FN_SIGNAL_PROCESS, hid(p), op, 0, options, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsTerminateProcess(client_handle_t *p, op_t *op, PCWSTR options)
{
    return op_call(FN_TERMINATE_PROCESS, hid(p), op, 0, options, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsModifyProcess(client_handle_t *p, op_t *op, PCWSTR settings)
{
    return op_call(FN_MODIFY_PROCESS, hid(p), op, 0, settings, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsGetProcessProperties(client_handle_t *p, op_t *op, PCWSTR query)
{
    return op_call(FN_PROCESS_PROPERTIES, hid(p), op, 0, query, NULL, NULL);
}

__declspec(dllexport) HRESULT WINAPI HcsSetProcessCallback(client_handle_t *p, UINT32 options, void *ctx, event_callback cb)
{
    (void)options;
    return set_callback(FN_PROCESS_CALLBACK, p, ctx, cb);
}

/* -- the service's own settings: none the stand-in keeps -- */

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
