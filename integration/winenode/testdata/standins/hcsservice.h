/*
 * The stand-in HCS service's parts (hcsservice.c: connections, handles,
 * operations; hcssystem.c: compute systems and their processes).
 * Everything below is under the service's one lock unless it says not.
 */
#include "standin.h"
#include "hcsproto.h"

#define HCS_E_INVALID_STATE ((HRESULT)0x80370105L)
#define HCS_E_INVALID_JSON ((HRESULT)0x8037010DL)
#define HCS_E_SYSTEM_NOT_FOUND ((HRESULT)0x8037010EL)
#define HCS_E_SYSTEM_ALREADY_EXISTS ((HRESULT)0x8037010FL)
#define HCS_E_SYSTEM_ALREADY_STOPPED ((HRESULT)0x80370110L)
#define HCS_E_OPERATION_TIMEOUT ((HRESULT)0x80370118L)
#define HCS_E_PROCESS_ALREADY_STOPPED ((HRESULT)0x8037011FL)
#define HCS_E_PROCESS_NOT_FOUND HRESULT_FROM_WIN32(ERROR_NOT_FOUND)
#define EVENT_SYSTEM_EXITED 0x00000001
#define EVENT_PROCESS_EXITED 0x00010000

typedef struct conn conn_t;
typedef struct sys sys_t;
typedef struct process process_t;

/* An operation the service carries: its client's, until completed. */
typedef struct sop {
    struct sop *next;
    conn_t *conn;
    ULONGLONG id;
    HANDLE canceled;
} sop_t;

extern CRITICAL_SECTION lock;

enum { STATE_CREATED, STATE_RUNNING, STATE_STOPPED };

struct sys {
    struct sys *next;
    LONG refs; /* handles, threads, and the list while not stopped */
    WCHAR id[256];
    WCHAR owner[64];
    WCHAR volume[MAX_PATH]; /* the container's C:\ */
    WCHAR hostname[64];     /* the document's HostName */
    HANDLE job;
    FILETIME started;
    int state;
    BOOL terminate_on_close;
    process_t *processes;
    char *links[32]; /* mapped directories: Linux links in the volume */
    int nlinks;
    int nmodify;           /* HcsModifyComputeSystem documents kept */
    ULONGLONG peak_commit; /* the most memory committed seen (statistics) */
};

const WCHAR *state_name(int state);
DWORD active_processes(sys_t *s);
void ctrl_event(HANDLE process, DWORD event);

/* hcsservice.c */
void op_complete(sop_t *op, HRESULT hr, const WCHAR *result, const process_t *stdio);
void send_event(sys_t *s, process_t *p, UINT32 type, const WCHAR *data);
int system_handles(const sys_t *s);

/* hcssystem.c */
struct process {
    struct process *next;
    sys_t *sys;
    PROCESS_INFORMATION pi;
    HANDLE std[3]; /* the caller's ends of the stdio pipes, still held */
    BOOL exited;
    DWORD code;
};

HRESULT system_create(const WCHAR *id, const WCHAR *config, sop_t *op, sys_t **out);
sys_t *system_find(const WCHAR *id);
void system_hold(sys_t *s);
void system_release(sys_t *s);
BOOL system_terminate_on_close(const sys_t *s);
HRESULT system_start(sys_t *s, sop_t *op);
HRESULT system_shutdown(sys_t *s, sop_t *op);
HRESULT system_terminate(sys_t *s, sop_t *op);
void system_terminate_now(sys_t *s);
HRESULT system_modify(sys_t *s, sop_t *op, const WCHAR *doc);
HRESULT system_properties(sys_t *s, sop_t *op, const WCHAR *query);
void systems_enumerate(const WCHAR *query, sop_t *op);
BOOL systems_any(void);
HRESULT process_create(sys_t *s, const WCHAR *params, sop_t *op, process_t **out);
process_t *process_find(sys_t *s, DWORD pid);
HRESULT process_info(process_t *p, sop_t *op);
HRESULT process_signal(process_t *p, sop_t *op, const WCHAR *options, BOOL *held, HRESULT *held_hr);
HRESULT process_terminate(process_t *p, sop_t *op);
HRESULT process_modify(process_t *p, sop_t *op, const WCHAR *settings);
HRESULT process_properties(process_t *p, sop_t *op, const WCHAR *query);

/* faulted applies the test's fault of function (faults.h) to op;
 * fault_apply applies one of kind call, op, stall or deaf. */
BOOL faulted(const char *function, sop_t *op, HRESULT *ret);
BOOL fault_apply(int kind, HRESULT hr, const char *function, sop_t *op, HRESULT *ret);

/* hcshold.c */
void hold_start(ULONGLONG via, process_t *p, sop_t *op, HRESULT hr);
BOOL hold_queue(ULONGLONG via, process_t *p, DWORD fn, sop_t *op, const WCHAR *options);

/* hcsenv.c */
const WCHAR *json_read(const WCHAR *p, WCHAR *out, size_t n);
BOOL json_string(const WCHAR *doc, const WCHAR *key, WCHAR *out, size_t n);
BOOL json_true(const WCHAR *doc, const WCHAR *key);
void container_path(const WCHAR *volume, const WCHAR *in, WCHAR *out, size_t n);
void with_program(const WCHAR *volume, const WCHAR *line, WCHAR *out, size_t n);
WCHAR *environment(const WCHAR *doc, const WCHAR *hostname);
void keep_document(const WCHAR *id, const WCHAR *config);
BOOL command_line(const WCHAR *params, WCHAR *out, size_t n);
