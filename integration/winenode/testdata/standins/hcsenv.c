/*
 * The stand-in HCS service's reading of documents and its container
 * paths (see hcssystem.c for why a container's C:\ is a directory).
 */
#include "hcsservice.h"
#include <stdio.h>
#include <stdlib.h>

/* json_read reads the JSON string at p (its opening quote) into out,
 * unescaped, and returns what follows its closing quote. */
const WCHAR *json_read(const WCHAR *p, WCHAR *out, size_t n)
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
BOOL json_string(const WCHAR *doc, const WCHAR *key, WCHAR *out, size_t n)
{
    WCHAR pat[128];
    const WCHAR *p;
    swprintf(pat, 128, L"\"%ls\":\"", key);
    if (!doc || !(p = wcsstr(doc, pat)))
        return FALSE;
    json_read(p + wcslen(pat) - 1, out, n);
    return TRUE;
}

BOOL json_true(const WCHAR *doc, const WCHAR *key)
{
    WCHAR pat[128];
    swprintf(pat, 128, L"\"%ls\":true", key);
    return doc && wcsstr(doc, pat) != NULL;
}

/* container_path rewrites every C:\ in in as the container's volume. */
void container_path(const WCHAR *volume, const WCHAR *in, WCHAR *out, size_t n)
{
    size_t i = 0, vl = wcslen(volume);
    while (*in && i + 1 < n) {
        if ((in[0] == L'C' || in[0] == L'c') && in[1] == L':' && in[2] == L'\\' && i + vl + 1 < n) {
            memcpy(out + i, volume, vl * sizeof(WCHAR));
            i += vl;
            in += 2;
        } else
            out[i++] = *in++;
    }
    out[i] = 0;
}

/* with_program puts the volume's copy of a program named without a
 * directory in front of the command line. */
void with_program(const WCHAR *volume, const WCHAR *line, WCHAR *out, size_t n)
{
    WCHAR name[MAX_PATH], path[MAX_PATH];
    size_t k = 0;
    const WCHAR *rest = line;
    if (*line == L'"' || wcschr(line, L'\\') == NULL || (wcschr(line, L' ') && wcschr(line, L'\\') > wcschr(line, L' '))) {
        while (*rest && *rest != L' ' && k + 1 < MAX_PATH)
            name[k++] = *rest++;
        name[k] = 0;
        if (*line != L'"' && !wcschr(name, L'\\')) {
            swprintf(path, MAX_PATH, L"%ls\\%ls", volume, name);
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

/* computer_name writes COMPUTERNAME=NAME for the container's host name:
 * a container's computer name is its document's GuestOs.HostName (HCS
 * JSON schema v2; hcsshim internal/hcsoci/hcsdoc_wcow.go sets it from
 * the OCI spec's hostname), and COMPUTERNAME holds the NetBIOS form Windows
 * derives from it, upper case, at most MAX_COMPUTERNAME_LENGTH (15)
 * characters (learn.microsoft.com, GetComputerNameW and "Computer
 * names"). Returns the characters written, 0 with no host name. */
static size_t computer_name(const WCHAR *hostname, WCHAR *out, size_t n)
{
    size_t i, k;
    if (!hostname || !hostname[0] || n < 30)
        return 0;
    k = swprintf(out, n, L"COMPUTERNAME=");
    for (i = 0; hostname[i] && hostname[i] != L'.' && i < MAX_COMPUTERNAME_LENGTH; i++)
        out[k++] = towupper(hostname[i]);
    out[k] = 0;
    return k;
}

/* environment is the base of the stand-in's own environment (base_env)
 * with the container's COMPUTERNAME (computer_name) and the document's
 * Environment over it, as a CreateProcess block. */
WCHAR *environment(const WCHAR *doc, const WCHAR *hostname)
{
    WCHAR *own = GetEnvironmentStringsW(), *block, *b, *key = malloc(32768 * sizeof(WCHAR)), *val = malloc(32768 * sizeof(WCHAR));
    const WCHAR *e, *p;
    size_t n = 2 + 64, k;
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
    if (!(doc && wcsstr(doc, L"\"COMPUTERNAME\":")) && (k = computer_name(hostname, b, n - (b - block))) > 0)
        b += k + 1;
    for (e = own; *e; e += wcslen(e) + 1) {
        const WCHAR *eq = wcschr(e + 1, L'=');
        WCHAR pat[1100];
        k = eq ? (size_t)(eq - e) : 0;
        if (!eq || k >= 1024 || !base_env(e, k) || (hostname && hostname[0] && k == 12 && !_wcsnicmp(e, L"COMPUTERNAME", 12)))
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

/* keep_document writes the document to the stand-in's documents. */
void keep_document(const WCHAR *id, const WCHAR *config)
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

/* quote_arg appends arg to out quoted as CommandLineToArgvW reads it back
 * (backslashes doubled before a quote; the whole quoted when it holds a
 * space, a tab or a quote, or is empty). */
static size_t quote_arg(const WCHAR *arg, WCHAR *out, size_t i, size_t n)
{
    BOOL q = !*arg || wcspbrk(arg, L" \t\"") != NULL;
    size_t slashes = 0;
    if (q && i + 1 < n)
        out[i++] = L'"';
    for (; *arg && i + 2 < n; arg++) {
        if (*arg == L'\\') {
            slashes++;
        } else {
            if (*arg == L'"') {
                for (slashes++; slashes > 0 && i + 1 < n; slashes--)
                    out[i++] = L'\\';
            }
            slashes = 0;
        }
        out[i++] = *arg;
    }
    if (q) {
        for (; slashes > 0 && i + 1 < n; slashes--)
            out[i++] = L'\\';
        if (i + 1 < n)
            out[i++] = L'"';
    }
    out[i] = 0;
    return i;
}

/* command_line is the process's command: its CommandLine, or else its
 * CommandArgs joined as CreateProcess reads them (HCS JSON schema,
 * ProcessParameters.CommandArgs: used when CommandLine is empty). FALSE
 * when it has neither. */
BOOL command_line(const WCHAR *params, WCHAR *out, size_t n)
{
    const WCHAR *p, *end;
    WCHAR *arg;
    size_t i = 0;
    if (json_string(params, L"CommandLine", out, n) && out[0])
        return TRUE;
    out[0] = 0;
    if (!params || !(p = wcsstr(params, L"\"CommandArgs\":[")))
        return FALSE;
    p += wcslen(L"\"CommandArgs\":[");
    arg = malloc(n * sizeof(WCHAR));
    while (*p == L'"') {
        p = json_read(p, arg, n);
        if (i && i + 1 < n)
            out[i++] = L' ';
        i = quote_arg(arg, out, i, n);
        if (*p == L',')
            p++;
    }
    end = p;
    free(arg);
    return *end == L']' && out[0];
}
