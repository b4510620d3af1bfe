/*
 * The stand-in computecore.dll's client side: operations, handles, and the
 * connection to the stand-in HCS service (what each follows: computecore.c).
 */
#include "hcsclient.h"

CRITICAL_SECTION lock;
static CRITICAL_SECTION wlock; /* writes to the pipe */
static HANDLE pipe = INVALID_HANDLE_VALUE;
op_t *ops;
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
void free_op(op_t *op)
{
    HANDLE std[3] = {op->info.StdInput, op->info.StdOutput, op->info.StdError};
    for (int i = 0; i < 3 && !op->info_taken; i++)
        if (std[i])
            CloseHandle(std[i]);
    CloseHandle(op->done);
    free(op->result);
    free(op);
}

op_t *unlink_op(op_t *op)
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
hcs_msg *call(DWORD fn, ULONGLONG h, const op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2)
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
HRESULT reply_hr(hcs_msg *r, ULONGLONG *h)
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
HRESULT op_call(DWORD fn, ULONGLONG h, op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2, ULONGLONG *out)
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

client_handle_t *new_handle(ULONGLONG h)
{
    client_handle_t *x = calloc(1, sizeof(client_handle_t));
    x->h = h;
    EnterCriticalSection(&lock);
    x->next = handles;
    handles = x;
    LeaveCriticalSection(&lock);
    return x;
}

void close_handle(DWORD fn, client_handle_t *x)
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

ULONGLONG hid(const client_handle_t *x) { return x ? x->h : 0; }

