/*
 * A stand-in for computenetwork.dll (HCN) for the Windows node under Wine
 * (integration/winenode): the namespace functions hcsshim's hcn package
 * calls for containerd.exe's pod network namespaces (pkg/netns:
 * HostComputeNamespace.Create, GetNamespaceByID, Delete), with their
 * signatures and contract: a namespace is created with an id of HCN's
 * choosing, opened, queried, enumerated with an ID filter and deleted;
 * results are CoTaskMemAlloc'ed. Namespaces are kept as files under
 * C:\ProgramData\winproc-standins\namespaces, so every process sees them.
 *
 * It leaves unproven what only HNS does: network compartments, endpoints
 * and their policies (a namespace here holds nothing), and HNS's own errors.
 * Every process under Wine shares the host's network; the test CNI plugin
 * gives pods the host's loopback address.
 */
#include "standin.h"
#include <objbase.h>
#include <stdio.h>

#define HCN_E_NAMESPACE_NOT_FOUND ((HRESULT)0x803B0011L)

typedef struct {
    GUID id;
} ns_t;

static void guid_text(const GUID *g, WCHAR *out)
{
    swprintf(out, 40, L"%08lx-%04hx-%04hx-%02x%02x-%02x%02x%02x%02x%02x%02x", g->Data1, g->Data2, g->Data3,
             g->Data4[0], g->Data4[1], g->Data4[2], g->Data4[3], g->Data4[4], g->Data4[5], g->Data4[6], g->Data4[7]);
}

static void ns_file(const GUID *g, WCHAR *out)
{
    WCHAR dir[MAX_PATH], id[40];
    CreateDirectoryW(STANDIN_STATE, NULL);
    swprintf(dir, MAX_PATH, L"%ls\\namespaces", STANDIN_STATE);
    CreateDirectoryW(dir, NULL);
    guid_text(g, id);
    swprintf(out, MAX_PATH, L"%ls\\%ls", dir, id);
}

static WCHAR *cotask(const WCHAR *s)
{
    size_t n = (wcslen(s) + 1) * sizeof(WCHAR);
    WCHAR *d = CoTaskMemAlloc(n);
    memcpy(d, s, n);
    return d;
}

__declspec(dllexport) HRESULT WINAPI HcnCreateNamespace(const GUID *id, PCWSTR settings, ns_t **ns, PWSTR *result)
{
    WCHAR file[MAX_PATH];
    ns_t *n = calloc(1, sizeof(ns_t));
    HRESULT hr;
    (void)settings;
    *result = NULL;
    n->id = *id;
    static const GUID zero;
    if (!memcmp(id, &zero, sizeof(GUID)))
        CoCreateGuid(&n->id);
    ns_file(&n->id, file);
    if (FAILED(hr = standin_write(file, L"namespace"))) {
        free(n);
        return hr;
    }
    *ns = n;
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcnOpenNamespace(const GUID *id, ns_t **ns, PWSTR *result)
{
    WCHAR file[MAX_PATH];
    *result = NULL;
    ns_file(id, file);
    if (GetFileAttributesW(file) == INVALID_FILE_ATTRIBUTES)
        return HCN_E_NAMESPACE_NOT_FOUND;
    *ns = calloc(1, sizeof(ns_t));
    (*ns)->id = *id;
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcnCloseNamespace(ns_t *ns)
{
    free(ns);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcnQueryNamespaceProperties(ns_t *ns, PCWSTR query, PWSTR *properties, PWSTR *result)
{
    WCHAR id[40], doc[256];
    (void)query;
    *result = NULL;
    guid_text(&ns->id, id);
    swprintf(doc, 256, L"{\"ID\":\"%ls\",\"Type\":\"HostDefault\",\"SchemaVersion\":{\"Major\":2,\"Minor\":0}}", id);
    *properties = cotask(doc);
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcnModifyNamespace(ns_t *ns, PCWSTR settings, PWSTR *result)
{
    (void)ns;
    (void)settings;
    *result = NULL;
    return S_OK;
}

__declspec(dllexport) HRESULT WINAPI HcnDeleteNamespace(const GUID *id, PWSTR *result)
{
    WCHAR file[MAX_PATH];
    *result = NULL;
    ns_file(id, file);
    return DeleteFileW(file) ? S_OK : HCN_E_NAMESPACE_NOT_FOUND;
}

/* HcnEnumerateNamespaces lists the namespaces' ids, those matching the
 * query's ID filter when it has one. */
__declspec(dllexport) HRESULT WINAPI HcnEnumerateNamespaces(PCWSTR query, PWSTR *namespaces, PWSTR *result)
{
    WCHAR pattern[MAX_PATH], list[16384], want[40] = L"";
    const WCHAR *f;
    WIN32_FIND_DATAW fd;
    HANDLE h;
    size_t i = 0;
    *result = NULL;
    if (query && (f = wcsstr(query, L"ID\\\":\\\"")))
        swprintf(want, 40, L"%.36ls", f + wcslen(L"ID\\\":\\\""));
    CreateDirectoryW(STANDIN_STATE, NULL);
    swprintf(pattern, MAX_PATH, L"%ls\\namespaces\\*", STANDIN_STATE);
    i += swprintf(list, 16384, L"[");
    h = FindFirstFileW(pattern, &fd);
    if (h != INVALID_HANDLE_VALUE) {
        do {
            if (fd.cFileName[0] == L'.' || (want[0] && _wcsicmp(want, fd.cFileName)))
                continue;
            i += swprintf(list + i, 16384 - i, L"%ls\"%ls\"", i > 1 ? L"," : L"", fd.cFileName);
        } while (i + 64 < 16384 && FindNextFileW(h, &fd));
        FindClose(h);
    }
    swprintf(list + i, 16384 - i, L"]");
    *namespaces = cotask(list);
    return S_OK;
}
