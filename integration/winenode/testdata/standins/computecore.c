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
#include "hcsclient.h"

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
