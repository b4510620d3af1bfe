/*
 * A stand-in for pdh.dll, for the kubelet on the Windows node under Wine
 * (integration/winenode): the eight functions the kubelet's binding loads
 * (github.com/JeffAshton/win_pdh, which k8s.io/kubernetes
 * pkg/kubelet/winstats perfcounters.go newPerfCounter and getQueriedData
 * call), for the counters the kubelet adds at its start. Wine's own pdh.dll
 * has none of \Process(_Total)\Working Set - Private, \Memory\Committed
 * Bytes or \Network Adapter(*)\..., and a counter the kubelet cannot add
 * ends it. The node loads this DLL for kubelet.exe only (a DllOverrides of
 * its own, node.go), the contract tests are testdata/pdhcontract.
 *
 * What it answers, as Microsoft's PDH reference
 * (learn.microsoft.com/windows/win32/api/pdh/) writes it:
 *  - PdhOpenQuery (PdhOpenQueryW: a NULL data source is real-time data)
 *    gives a query handle; PdhCloseQuery closes it and its counters.
 *  - PdhAddCounterW and PdhAddEnglishCounterW take a full path
 *    \Object(Instance)\Counter or \Object\Counter: an object it does not
 *    know is PDH_CSTATUS_NO_OBJECT, a counter of the object it does not know
 *    PDH_CSTATUS_NO_COUNTER, a path not of that form
 *    PDH_CSTATUS_BAD_COUNTERNAME; a bad query handle is PDH_INVALID_HANDLE.
 *    PdhValidatePathW answers the same for a path alone.
 *  - PdhCollectQueryData samples every counter of the query; a query with
 *    no counter is PDH_NO_DATA.
 *  - Rate counters (% Processor Time, .../sec) need two samples ("requires
 *    that PdhCollectQueryData be called twice", PdhCollectQueryData's
 *    remarks); with fewer, a value's CStatus is PDH_CSTATUS_INVALID_DATA
 *    and PdhGetFormattedCounterValue answers PDH_INVALID_DATA.
 *  - PdhGetFormattedCounterArrayW with a buffer too small (or none) answers
 *    PDH_MORE_DATA with the size needed in bytes and the item count; the
 *    items' names are stored in the same buffer after the items.
 *  - Values: % Processor Time from GetSystemTimes (busy over elapsed, in
 *    percent); Working Set - Private of _Total the sum of the working sets
 *    (GetProcessMemoryInfo) of the processes it may open; Committed Bytes
 *    GetPerformanceInfo's CommitTotal pages; Network Adapter counters from
 *    GetIfTable2's rows (not the software loopback), by their description.
 *
 * It leaves unproven: other objects and counters, instances other than
 * _Total of Processor and Process, wildcards in other places than the whole
 * instance, localized names (PdhAddCounterW is PdhAddEnglishCounterW
 * here), log files as data sources, the scaling and capping of
 * PDH_FMT_NOSCALE, PDH_FMT_1000 and PDH_FMT_NOCAP100, the characters
 * Windows replaces in an adapter's instance name, and that the Windows
 * working set counted here is private (Wine reports a process's resident
 * set).
 */
#define _WIN32_WINNT 0x0A00 /* GetIfTable2 */
#include <winsock2.h>
#include <windows.h>
#include <ws2ipdef.h>
#include <iphlpapi.h>
#include <psapi.h>
#include <wchar.h>

typedef LONG PDH_STATUS;

#define PDH_CSTATUS_INVALID_DATA 0xC0000BBAL
#define PDH_CSTATUS_NO_OBJECT 0xC0000BB8L
#define PDH_CSTATUS_NO_COUNTER 0xC0000BB9L
#define PDH_CSTATUS_NO_INSTANCE 0x800007D1L
#define PDH_CSTATUS_BAD_COUNTERNAME 0xC0000BC0L
#define PDH_MORE_DATA 0x800007D2L
#define PDH_NO_DATA 0x800007D5L
#define PDH_INVALID_ARGUMENT 0xC0000BBDL
#define PDH_INVALID_HANDLE 0xC0000BBCL
#define PDH_INVALID_DATA 0xC0000BC6L
#define PDH_FMT_LONG 0x100
#define PDH_FMT_DOUBLE 0x200
#define PDH_FMT_LARGE 0x400

typedef struct {
    DWORD CStatus;
    union {
        LONG longValue;
        double doubleValue;
        LONGLONG largeValue;
        LPCSTR AnsiStringValue;
        LPCWSTR WideStringValue;
    };
} PDH_FMT_COUNTERVALUE;

typedef struct {
    LPWSTR szName;
    PDH_FMT_COUNTERVALUE FmtValue;
} PDH_FMT_COUNTERVALUE_ITEM_W;

enum kind { CPU_TIME, WORKING_SET, COMMITTED, NET };
enum { MAX_INSTANCES = 32, NAME_LEN = 260, QUERY_MAGIC = 0x48445051, COUNTER_MAGIC = 0x48445043 };

/* A sample: each instance's raw value, and when it was taken. For
 * CPU_TIME, raw is busy time and raw2 all time, in 100 ns. */
struct sample {
    int count;
    LONGLONG ticks;
    WCHAR names[MAX_INSTANCES][NAME_LEN];
    ULONGLONG raw[MAX_INSTANCES], raw2[MAX_INSTANCES];
};

struct counter {
    DWORD magic;
    struct query *query;
    struct counter *next;
    enum kind kind;
    int net_field; /* NET: which of the row's counts */
    BOOL rate;
    WCHAR instance[NAME_LEN]; /* "*" for every instance, "" for none */
    int samples;
    struct sample prev, cur;
};

struct query {
    DWORD magic;
    struct counter *counters;
};

static const struct {
    const WCHAR *object, *counter;
    enum kind kind;
    int net_field;
    BOOL rate, instances;
} known[] = {
    {L"Processor", L"% Processor Time", CPU_TIME, 0, TRUE, TRUE},
    {L"Process", L"Working Set - Private", WORKING_SET, 0, FALSE, TRUE},
    {L"Memory", L"Committed Bytes", COMMITTED, 0, FALSE, FALSE},
    {L"Network Adapter", L"Packets Received/sec", NET, 0, TRUE, TRUE},
    {L"Network Adapter", L"Packets Sent/sec", NET, 1, TRUE, TRUE},
    {L"Network Adapter", L"Bytes Received/sec", NET, 2, TRUE, TRUE},
    {L"Network Adapter", L"Bytes Sent/sec", NET, 3, TRUE, TRUE},
    {L"Network Adapter", L"Packets Received Discarded", NET, 4, FALSE, TRUE},
    {L"Network Adapter", L"Packets Received Errors", NET, 5, FALSE, TRUE},
    {L"Network Adapter", L"Packets Outbound Discarded", NET, 6, FALSE, TRUE},
    {L"Network Adapter", L"Packets Outbound Errors", NET, 7, FALSE, TRUE},
};

/* parse_path splits \Object(Instance)\Counter (or \Object\Counter) and
 * finds it in known; it answers as PdhAddCounter does. */
static PDH_STATUS parse_path(LPCWSTR path, int *which, WCHAR *instance)
{
    WCHAR object[NAME_LEN];
    const WCHAR *p, *end, *counter;
    size_t n;
    int i;
    BOOL found = FALSE;

    if (!path || path[0] != L'\\' || path[1] == L'\\')
        return PDH_CSTATUS_BAD_COUNTERNAME;
    p = path + 1;
    counter = wcschr(p, L'\\');
    if (!counter || !counter[1])
        return PDH_CSTATUS_BAD_COUNTERNAME;
    end = wcschr(p, L'(');
    instance[0] = 0;
    if (end && end < counter) {
        const WCHAR *close = wcschr(end, L')');
        if (!close || close + 1 != counter || close - end - 1 >= NAME_LEN)
            return PDH_CSTATUS_BAD_COUNTERNAME;
        wcsncpy(instance, end + 1, close - end - 1);
        instance[close - end - 1] = 0;
    } else
        end = counter;
    n = end - p;
    if (n == 0 || n >= NAME_LEN)
        return PDH_CSTATUS_BAD_COUNTERNAME;
    wcsncpy(object, p, n);
    object[n] = 0;
    counter++;
    for (i = 0; i < (int)(sizeof(known) / sizeof(known[0])); i++) {
        if (_wcsicmp(known[i].object, object))
            continue;
        found = TRUE;
        if (!_wcsicmp(known[i].counter, counter)) {
            *which = i;
            return ERROR_SUCCESS;
        }
    }
    return found ? PDH_CSTATUS_NO_COUNTER : PDH_CSTATUS_NO_OBJECT;
}

PDH_STATUS WINAPI PdhValidatePathW(LPCWSTR path)
{
    int which;
    WCHAR instance[NAME_LEN];
    return parse_path(path, &which, instance);
}

PDH_STATUS WINAPI PdhOpenQuery(LPCWSTR source, DWORD_PTR user, HANDLE *query)
{
    struct query *q;
    (void)user;
    if (!query)
        return PDH_INVALID_ARGUMENT;
    if (source && *source)
        return PDH_INVALID_ARGUMENT; /* log files: unproven, refused */
    q = calloc(1, sizeof(*q));
    q->magic = QUERY_MAGIC;
    *query = q;
    return ERROR_SUCCESS;
}

PDH_STATUS WINAPI PdhCloseQuery(HANDLE query)
{
    struct query *q = query;
    struct counter *c, *next;
    if (!q || q->magic != QUERY_MAGIC)
        return PDH_INVALID_HANDLE;
    for (c = q->counters; c; c = next) {
        next = c->next;
        c->magic = 0;
        free(c);
    }
    q->magic = 0;
    free(q);
    return ERROR_SUCCESS;
}

PDH_STATUS WINAPI PdhAddEnglishCounterW(HANDLE query, LPCWSTR path, DWORD_PTR user, HANDLE *counter)
{
    struct query *q = query;
    struct counter *c;
    WCHAR instance[NAME_LEN];
    int which;
    PDH_STATUS status;
    (void)user;
    if (!q || q->magic != QUERY_MAGIC)
        return PDH_INVALID_HANDLE;
    if (!counter)
        return PDH_INVALID_ARGUMENT;
    if ((status = parse_path(path, &which, instance)) != ERROR_SUCCESS)
        return status;
    c = calloc(1, sizeof(*c));
    c->magic = COUNTER_MAGIC;
    c->query = q;
    c->kind = known[which].kind;
    c->net_field = known[which].net_field;
    c->rate = known[which].rate;
    wcscpy(c->instance, known[which].instances ? instance : L"");
    c->next = q->counters;
    q->counters = c;
    *counter = c;
    return ERROR_SUCCESS;
}

PDH_STATUS WINAPI PdhAddCounterW(HANDLE query, LPCWSTR path, DWORD_PTR user, HANDLE *counter)
{
    return PdhAddEnglishCounterW(query, path, user, counter);
}

static void add(struct sample *s, const WCHAR *name, ULONGLONG raw, ULONGLONG raw2)
{
    if (s->count == MAX_INSTANCES)
        return;
    wcsncpy(s->names[s->count], name, NAME_LEN - 1);
    s->names[s->count][NAME_LEN - 1] = 0;
    s->raw[s->count] = raw;
    s->raw2[s->count] = raw2;
    s->count++;
}

static ULONGLONG filetime(FILETIME f) { return ((ULONGLONG)f.dwHighDateTime << 32) | f.dwLowDateTime; }

static ULONGLONG working_set_total(void)
{
    DWORD pids[4096], bytes, i;
    ULONGLONG sum = 0;
    if (!EnumProcesses(pids, sizeof(pids), &bytes))
        return 0;
    for (i = 0; i < bytes / sizeof(DWORD); i++) {
        PROCESS_MEMORY_COUNTERS pmc;
        HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pids[i]);
        if (!h)
            continue;
        if (GetProcessMemoryInfo(h, &pmc, sizeof(pmc)))
            sum += pmc.WorkingSetSize;
        CloseHandle(h);
    }
    return sum;
}

static void sample_net(struct sample *s, int field)
{
    MIB_IF_TABLE2 *table;
    ULONG i;
    if (GetIfTable2(&table) != NO_ERROR)
        return;
    for (i = 0; i < table->NumEntries; i++) {
        MIB_IF_ROW2 *r = &table->Table[i];
        ULONG64 v[] = {r->InUcastPkts + r->InNUcastPkts, r->OutUcastPkts + r->OutNUcastPkts,
                       r->InOctets, r->OutOctets, r->InDiscards, r->InErrors, r->OutDiscards, r->OutErrors};
        if (r->Type == IF_TYPE_SOFTWARE_LOOPBACK)
            continue;
        add(s, r->Description, v[field], 0);
    }
    FreeMibTable(table);
}

static void sample(struct counter *c, struct sample *s)
{
    LARGE_INTEGER now;
    FILETIME idle, kernel, user;
    PERFORMANCE_INFORMATION perf;
    QueryPerformanceCounter(&now);
    s->count = 0;
    s->ticks = now.QuadPart;
    switch (c->kind) {
    case CPU_TIME:
        if (GetSystemTimes(&idle, &kernel, &user)) {
            /* kernel time includes idle time (GetSystemTimes). */
            ULONGLONG all = filetime(kernel) + filetime(user);
            add(s, L"_Total", all - filetime(idle), all);
        }
        break;
    case WORKING_SET:
        add(s, L"_Total", working_set_total(), 0);
        break;
    case COMMITTED:
        perf.cb = sizeof(perf);
        if (GetPerformanceInfo(&perf, sizeof(perf)))
            add(s, L"", (ULONGLONG)perf.CommitTotal * perf.PageSize, 0);
        break;
    case NET:
        sample_net(s, c->net_field);
        break;
    }
}

PDH_STATUS WINAPI PdhCollectQueryData(HANDLE query)
{
    struct query *q = query;
    struct counter *c;
    if (!q || q->magic != QUERY_MAGIC)
        return PDH_INVALID_HANDLE;
    if (!q->counters)
        return PDH_NO_DATA;
    for (c = q->counters; c; c = c->next) {
        c->prev = c->cur;
        sample(c, &c->cur);
        c->samples++;
    }
    return ERROR_SUCCESS;
}

/* value is instance i's value of the counter's last sample. */
static DWORD value(struct counter *c, int i, double *v)
{
    int j;
    LARGE_INTEGER freq;
    if (!c->rate) {
        *v = (double)c->cur.raw[i];
        return ERROR_SUCCESS;
    }
    if (c->samples < 2)
        return PDH_CSTATUS_INVALID_DATA;
    for (j = 0; j < c->prev.count; j++) {
        if (wcscmp(c->prev.names[j], c->cur.names[i]))
            continue;
        if (c->kind == CPU_TIME) {
            ULONGLONG all = c->cur.raw2[i] - c->prev.raw2[j];
            *v = all ? 100.0 * (double)(c->cur.raw[i] - c->prev.raw[j]) / (double)all : 0;
        } else {
            QueryPerformanceFrequency(&freq);
            *v = (double)(c->cur.raw[i] - c->prev.raw[j]) * freq.QuadPart /
                 (double)(c->cur.ticks - c->prev.ticks ? c->cur.ticks - c->prev.ticks : 1);
        }
        return ERROR_SUCCESS;
    }
    return PDH_CSTATUS_INVALID_DATA;
}

static void format(DWORD fmt, double v, DWORD status, PDH_FMT_COUNTERVALUE *out)
{
    out->CStatus = status;
    if (fmt & PDH_FMT_LARGE)
        out->largeValue = (LONGLONG)v;
    else if (fmt & PDH_FMT_LONG)
        out->longValue = (LONG)v;
    else
        out->doubleValue = v;
}

/* selected reports whether instance i of the last sample is the counter's. */
static BOOL selected(struct counter *c, int i)
{
    return !wcscmp(c->instance, L"*") || !_wcsicmp(c->instance, c->cur.names[i]);
}

PDH_STATUS WINAPI PdhGetFormattedCounterArrayW(HANDLE counter, DWORD fmt, DWORD *size, DWORD *count,
                                               PDH_FMT_COUNTERVALUE_ITEM_W *items)
{
    struct counter *c = counter;
    DWORD need = 0, n = 0, names;
    int i;
    if (!c || c->magic != COUNTER_MAGIC)
        return PDH_INVALID_HANDLE;
    if (!size || !count || !(fmt & (PDH_FMT_LONG | PDH_FMT_DOUBLE | PDH_FMT_LARGE)))
        return PDH_INVALID_ARGUMENT;
    for (i = 0; i < c->cur.count; i++) {
        if (!selected(c, i))
            continue;
        n++;
        need += sizeof(PDH_FMT_COUNTERVALUE_ITEM_W) + (wcslen(c->cur.names[i]) + 1) * sizeof(WCHAR);
    }
    if (*size < need || !items) {
        *size = need;
        *count = n;
        return PDH_MORE_DATA;
    }
    names = n * sizeof(PDH_FMT_COUNTERVALUE_ITEM_W);
    for (i = 0, n = 0; i < c->cur.count; i++) {
        double v = 0;
        DWORD status;
        WCHAR *name = (WCHAR *)((char *)items + names);
        if (!selected(c, i))
            continue;
        status = value(c, i, &v);
        wcscpy(name, c->cur.names[i]);
        names += (wcslen(name) + 1) * sizeof(WCHAR);
        items[n].szName = name;
        format(fmt, v, status, &items[n].FmtValue);
        n++;
    }
    *size = need;
    *count = n;
    return ERROR_SUCCESS;
}

PDH_STATUS WINAPI PdhGetFormattedCounterValue(HANDLE counter, DWORD fmt, DWORD *type, PDH_FMT_COUNTERVALUE *out)
{
    struct counter *c = counter;
    int i;
    if (!c || c->magic != COUNTER_MAGIC)
        return PDH_INVALID_HANDLE;
    if (!out || !(fmt & (PDH_FMT_LONG | PDH_FMT_DOUBLE | PDH_FMT_LARGE)))
        return PDH_INVALID_ARGUMENT;
    if (type)
        *type = 0;
    for (i = 0; i < c->cur.count; i++) {
        double v = 0;
        DWORD status;
        if (!selected(c, i))
            continue;
        status = value(c, i, &v);
        format(fmt, v, status, out);
        return status == ERROR_SUCCESS ? ERROR_SUCCESS : PDH_INVALID_DATA;
    }
    format(fmt, 0, c->samples ? PDH_CSTATUS_NO_INSTANCE : PDH_CSTATUS_INVALID_DATA, out);
    return PDH_INVALID_DATA;
}
