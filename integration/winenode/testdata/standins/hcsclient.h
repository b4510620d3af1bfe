/*
 * The stand-in computecore.dll's client side (hcsclient.c): its
 * operations, its handles and its connection to the stand-in HCS service
 * (hcsproto.h), which computecore.c's exported functions use.
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

extern CRITICAL_SECTION lock; /* the lists and the connection */
extern op_t *ops;

void free_op(op_t *op);
op_t *unlink_op(op_t *op);
HRESULT reply_hr(hcs_msg *r, ULONGLONG *h);
hcs_msg *call(DWORD fn, ULONGLONG h, const op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2);
HRESULT op_call(DWORD fn, ULONGLONG h, op_t *op, DWORD a, const WCHAR *s1, const WCHAR *s2, ULONGLONG *out);
client_handle_t *new_handle(ULONGLONG h);
void close_handle(DWORD fn, client_handle_t *x);
ULONGLONG hid(const client_handle_t *x);
