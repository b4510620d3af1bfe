#Requires -Version 5.1
#Requires -RunAsAdministrator
<#
.SYNOPSIS
Installs winproc on a Windows node that runs containerd 2.x.

.DESCRIPTION
Steps (each is safe to run again; see README.md beside this script):
  1. checks the node: Containers feature, containerd 2.x service, ctr.exe, the files to install;
  2. places the binaries: containerd-shim-winproc-v2.exe beside containerd.exe (containerd
     finds shims there), winproc-snapshotter.exe and winproc.exe in -InstallDir;
  3. registers winproc-snapshotter as a Windows service (or, with -SnapshotterAsTask, as a
     startup task) serving \\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter, and starts it;
     makes containerd depend on it, and a kubelet service on containerd, keeping their other
     dependencies (the order of the kubelet's graceful node shutdown);
  4. copies containerd-winproc.toml into containerd's conf.d and adds it to config.toml's
     imports (config.toml is backed up first, and restored if containerd rejects the result);
  5. restarts containerd (and the kubelet, if it ran) and checks that the windowsfilter
     snapshotter and differ are loaded;
  6. builds the pause image for this node's Windows build from -PauseBaseLayout with
     `winproc image pause`, imports it as winproc.local/pause:node, and runs `winproc doctor`;
  7. applies the RuntimeClass for this node's build with kubectl, when kubectl is here;
  8. smoke-tests the handler: crictl runp --runtime winproc, then stopp and rmp.

The node should be drained first: step 2 replaces the shim binary and step 5 restarts
containerd.

.PARAMETER PauseBaseLayout
OCI image layout directory holding the pause image's base (nanoserver) for this node's
Windows build; see README.md for how to make one.

.PARAMETER Source
Directory holding containerd-shim-winproc-v2.exe, winproc-snapshotter.exe, winproc.exe,
pause.exe, wincat.exe (from `make windows`) and containerd-winproc.toml. Default: this
script's directory.

.PARAMETER DefaultHandler
Make winproc containerd's default runtime handler (containerd-winproc-default.toml): pods
that name no RuntimeClass, as the node's HostProcess DaemonSets (kube-proxy, CNI plugins,
csi-proxy) do, then run on winproc.

.PARAMETER ContainerdConfig
containerd's config file. Default: the --config of the containerd service, else
C:\Program Files\containerd\config.toml.

.EXAMPLE
.\install.ps1 -PauseBaseLayout C:\images\nanoserver-ltsc2022
#>
[CmdletBinding()]
param(
    [Parameter(Mandatory = $true)]
    [string] $PauseBaseLayout,
    [string] $Source = $PSScriptRoot,
    [string] $InstallDir = (Join-Path $env:ProgramFiles 'winproc'),
    [string] $SnapshotterRoot = (Join-Path $env:ProgramData 'winproc\snapshotter'),
    [string] $ContainerdConfig,
    [switch] $SnapshotterAsTask,
    [switch] $DefaultHandler,
    [switch] $SkipRuntimeClass,
    [switch] $SkipSmokeTest
)

Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

# Names shared with the rest of winproc: the handler and snapshotter pipe are
# containerdconfig.Windows()'s, the pause image is install.PauseImage.
$Handler = 'winproc'
$ServiceName = 'winproc-snapshotter'
$SnapshotterPipe = '\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter'
$ContainerdPipe = '\\.\pipe\containerd-containerd'
$PauseImage = 'winproc.local/pause:node'
$FragmentFile = 'containerd-winproc.toml'
# With -DefaultHandler this fragment is installed as $FragmentFile instead.
$DefaultFragmentFile = 'containerd-winproc-default.toml'
$Namespace = 'k8s.io'
# The kubelet's service, as its graceful node shutdown names it (kubernetes
# pkg/kubelet/nodeshutdown/nodeshutdown_manager_windows.go).
$KubeletService = 'kubelet'

function Write-Step([string] $Message) {
    Write-Host "==> $Message" -ForegroundColor Cyan
}

# Runs a program, returns its output lines and throws with that output when
# it exits non-zero. Windows PowerShell turns a native program's stderr into
# errors, which must not abort the script by themselves.
function Invoke-Native {
    param([Parameter(Mandatory = $true)][string] $FilePath, [string[]] $ArgumentList = @())
    $saved = $ErrorActionPreference
    $ErrorActionPreference = 'Continue'
    try {
        $output = & $FilePath @ArgumentList 2>&1 | ForEach-Object { "$_" }
        $code = $LASTEXITCODE
    } finally {
        $ErrorActionPreference = $saved
    }
    if ($code -ne 0) {
        throw "$(Split-Path -Leaf $FilePath) $($ArgumentList -join ' ') failed (exit code $code):`n$($output -join "`n")"
    }
    return $output
}

# Waits until $Test returns true, or throws $Message after $Seconds.
function Wait-Until([scriptblock] $Test, [int] $Seconds, [string] $Message) {
    $deadline = (Get-Date).AddSeconds($Seconds)
    while (-not (& $Test)) {
        if ((Get-Date) -gt $deadline) { throw $Message }
        Start-Sleep -Milliseconds 500
    }
}

# Test-Pipe lists pipes rather than opening one: an open would take an
# instance from its server.
function Test-Pipe([string] $Path) {
    return [System.IO.Directory]::GetFiles('\\.\pipe\') -contains $Path
}

# New-StateDirectory makes a directory of winproc's state for Administrators
# and SYSTEM only, owned by Administrators, as containerd makes its own:
# under ProgramData a directory otherwise inherits read access for every
# user, and one a user made first would stay theirs. An existing directory
# is set the same way.
function New-StateDirectory([string] $Path) {
    New-Item -ItemType Directory -Force -Path $Path | Out-Null
    $acl = New-Object System.Security.AccessControl.DirectorySecurity
    $acl.SetSecurityDescriptorSddlForm('O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)')
    Set-Acl -LiteralPath $Path -AclObject $acl
}

# Writes UTF-8 without a byte order mark: containerd's TOML parser does not
# skip one.
function Write-Utf8File([string] $Path, [string] $Text) {
    [System.IO.File]::WriteAllText($Path, $Text, (New-Object System.Text.UTF8Encoding $false))
}

# Get-ServiceDependency lists what the service $Name depends on, as the
# service manager keeps it: the services (DependOnService) and the load
# order groups, with sc.exe's '+' before a group (DependOnGroup).
function Get-ServiceDependency([string] $Name) {
    $key = Get-ItemProperty -LiteralPath "HKLM:\SYSTEM\CurrentControlSet\Services\$Name" -ErrorAction SilentlyContinue
    $deps = @()
    if ($key -and $key.PSObject.Properties['DependOnService']) { $deps += @($key.DependOnService | Where-Object { $_ }) }
    if ($key -and $key.PSObject.Properties['DependOnGroup']) { $deps += @($key.DependOnGroup | Where-Object { $_ } | ForEach-Object { "+$_" }) }
    return , $deps
}

# Set-ServiceDependency makes the service $Name depend on $On ($Add) or not
# (-not $Add), keeping every other dependency it has: `sc.exe config
# depend=` replaces the whole list, so the list is read first.
function Set-ServiceDependency([string] $Name, [string] $On, [bool] $Add) {
    $deps = Get-ServiceDependency $Name
    $has = $deps -contains $On
    if ($has -eq $Add) { return }
    # @(): an if's output is unrolled, and one entry or none is no array.
    $new = @(if ($Add) { @($deps) + $On } else { $deps | Where-Object { $_ -ne $On } })
    # sc.exe takes '/' between entries and a lone '/' for none.
    $list = if ($new.Count -gt 0) { $new -join '/' } else { '/' }
    Invoke-Native 'sc.exe' @('config', $Name, 'depend=', $list) | Out-Null
    $verb = if ($Add) { 'now depends on' } else { 'no longer depends on' }
    Write-Host "    $Name $verb $On"
}

# --- 1. the node -------------------------------------------------------------

function Get-Node {
    Write-Step 'Checking the node'
    $os = Get-ItemProperty 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
    $build = "10.0.$($os.CurrentBuildNumber)"
    Write-Host "    Windows build $build.$($os.UBR)"

    $feature = Get-WindowsOptionalFeature -Online -FeatureName Containers
    if ($feature.State -ne 'Enabled') {
        throw 'The Containers feature is not enabled: Install-WindowsFeature Containers (Server) or Enable-WindowsOptionalFeature -Online -FeatureName Containers, then restart.'
    }

    $service = Get-CimInstance Win32_Service -Filter "Name='containerd'"
    if (-not $service) {
        throw 'There is no containerd service: install containerd 2.x and register it (containerd.exe --register-service).'
    }
    # PathName is e.g. "C:\Program Files\containerd\containerd.exe" --run-service --config ...
    if ($service.PathName -match '^\s*(?:"(?<exe>[^"]+)"|(?<exe>\S+))') {
        $containerd = $Matches['exe']
    } else {
        throw "Cannot read containerd.exe's path from the service's command line: $($service.PathName)"
    }
    $dir = Split-Path -Parent $containerd
    $config = $ContainerdConfig
    if (-not $config) {
        if ($service.PathName -match '--config[= ]\s*(?:"(?<cfg>[^"]+)"|(?<cfg>\S+))') {
            $config = $Matches['cfg']
        } else {
            $config = Join-Path $env:ProgramFiles 'containerd\config.toml'
        }
    }

    $version = (Invoke-Native $containerd @('--version')) -join ' '
    $major = if ($version -match ' v(?<major>\d+)\.\d+') { [int]$Matches['major'] } else { throw "Cannot read containerd's version from: $version" }
    if ($major -lt 2) {
        throw "winproc needs containerd 2.x (the sandbox API and config version 3); this node has: $version"
    }
    $ctr = Join-Path $dir 'ctr.exe'
    if (-not (Test-Path $ctr)) {
        throw "ctr.exe is not beside containerd.exe in $dir (it comes in containerd's release archive)."
    }
    Write-Host "    $version"
    Write-Host "    config $config"

    foreach ($f in 'containerd-shim-winproc-v2.exe', 'winproc-snapshotter.exe', 'winproc.exe', 'pause.exe', 'wincat.exe', $FragmentFile, $DefaultFragmentFile) {
        if (-not (Test-Path (Join-Path $Source $f))) {
            throw "$f is not in $Source (-Source): build the Windows binaries with 'make windows' and copy bin\windows\*.exe and install\* there."
        }
    }
    if (-not (Test-Path (Join-Path $PauseBaseLayout 'index.json'))) {
        throw "$PauseBaseLayout (-PauseBaseLayout) is not an OCI image layout (it has no index.json)."
    }
    # Stopping the snapshotter (step 2) also stops containerd and the
    # kubelet, which depend on it; step 5 starts them again.
    $kubelet = Get-Service $KubeletService -ErrorAction SilentlyContinue
    return [pscustomobject]@{
        Kubelet    = [bool]$kubelet
        KubeletRan = [bool]($kubelet -and $kubelet.Status -eq 'Running')
        Build      = $build
        Containerd = $containerd
        Dir        = $dir
        Config     = $config
        Ctr        = $ctr
    }
}

# --- 2. binaries -------------------------------------------------------------

function Stop-Snapshotter {
    if (Get-Service $ServiceName -ErrorAction SilentlyContinue) {
        # -Force: containerd and the kubelet depend on it and stop too.
        Stop-Service $ServiceName -Force
        Invoke-Native 'sc.exe' @('delete', $ServiceName) | Out-Null
        Wait-Until { -not (Get-Service $ServiceName -ErrorAction SilentlyContinue) } 30 "The $ServiceName service is still there 30 s after sc.exe delete (close services.msc and retry)."
    }
    if (Get-ScheduledTask -TaskName $ServiceName -ErrorAction SilentlyContinue) {
        Stop-ScheduledTask -TaskName $ServiceName
        Unregister-ScheduledTask -TaskName $ServiceName -Confirm:$false
    }
}

function Install-Binaries($Node) {
    Write-Step "Placing the binaries"
    Stop-Snapshotter
    New-Item -ItemType Directory -Force -Path $InstallDir | Out-Null
    try {
        # containerd looks for containerd-shim-winproc-v2.exe beside itself.
        Copy-Item (Join-Path $Source 'containerd-shim-winproc-v2.exe') $Node.Dir -Force
        foreach ($f in 'winproc-snapshotter.exe', 'winproc.exe', 'pause.exe', 'wincat.exe') {
            Copy-Item (Join-Path $Source $f) $InstallDir -Force
        }
    } catch {
        throw "Copying the binaries failed; a running winproc pod holds the shim binary open: drain the node and retry. $_"
    }
    Write-Host "    $(Join-Path $Node.Dir 'containerd-shim-winproc-v2.exe')"
    Write-Host "    $InstallDir\{winproc-snapshotter,winproc,pause,wincat}.exe"
}

# --- 3. the snapshotter ------------------------------------------------------

function Register-Snapshotter {
    $exe = Join-Path $InstallDir 'winproc-snapshotter.exe'
    $arguments = "-root `"$SnapshotterRoot`" -address $SnapshotterPipe -log-file `"$(Join-Path $SnapshotterRoot 'winproc-snapshotter.log')`""
    # winproc's own state root (the shim's records are there too), and the
    # snapshotter's root, which may be elsewhere.
    New-StateDirectory (Join-Path $env:ProgramData 'winproc')
    New-StateDirectory $SnapshotterRoot
    if ($SnapshotterAsTask) {
        Write-Step "Registering $ServiceName as a startup task"
        $action = New-ScheduledTaskAction -Execute $exe -Argument $arguments
        $trigger = New-ScheduledTaskTrigger -AtStartup
        $principal = New-ScheduledTaskPrincipal -UserId 'SYSTEM' -LogonType ServiceAccount -RunLevel Highest
        $settings = New-ScheduledTaskSettingsSet -ExecutionTimeLimit ([TimeSpan]::Zero) -RestartCount 999 `
            -RestartInterval (New-TimeSpan -Minutes 1) -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries
        Register-ScheduledTask -TaskName $ServiceName -Action $action -Trigger $trigger -Principal $principal `
            -Settings $settings -Description 'winproc windowsfilter snapshotter and differ for containerd' | Out-Null
        Start-ScheduledTask -TaskName $ServiceName
    } else {
        Write-Step "Registering the $ServiceName service"
        New-Service -Name $ServiceName -BinaryPathName "`"$exe`" $arguments" -DisplayName 'winproc snapshotter' `
            -Description 'winproc windowsfilter snapshotter and differ for containerd' -StartupType Automatic | Out-Null
        # Restart after a crash: 5 s, 5 s, then 30 s; the count resets after a day.
        Invoke-Native 'sc.exe' @('failure', $ServiceName, 'reset=', '86400', 'actions=', 'restart/5000/restart/5000/restart/30000') | Out-Null
        # The same when the service stops itself with an error (a failed start):
        # without the flag the service manager leaves it stopped.
        Invoke-Native 'sc.exe' @('failureflag', $ServiceName, '1') | Out-Null
        try {
            Start-Service $ServiceName
        } catch {
            throw "The $ServiceName service did not start; its log is $(Join-Path $SnapshotterRoot 'winproc-snapshotter.log'). To run it as a startup task instead, rerun with -SnapshotterAsTask. $_"
        }
    }
    Wait-Until { Test-Pipe $SnapshotterPipe } 30 "Nothing listens on $SnapshotterPipe 30 s after $ServiceName started."
    Write-Host "    listening on $SnapshotterPipe, snapshots in $SnapshotterRoot"
}

# Set-ServiceOrder orders the services for the node's start, stop and
# shutdown: containerd depends on winproc-snapshotter (it needs it to stop
# and remove containers), and the kubelet on containerd. The kubelet's
# graceful node shutdown reads its own dependencies at start and places
# itself before the first of them in PreshutdownOrder, so it stops the
# pods while containerd and the snapshotter still run. A startup task is
# no service: containerd must not depend on one that is gone, or it does
# not start.
function Set-ServiceOrder($Node) {
    Write-Step 'Ordering the services'
    Set-ServiceDependency 'containerd' $ServiceName (-not $SnapshotterAsTask)
    if ($Node.Kubelet) {
        Set-ServiceDependency $KubeletService 'containerd' $true
    }
    foreach ($name in @('containerd', $KubeletService)) {
        if ($name -eq 'containerd' -or $Node.Kubelet) {
            Write-Host "    $name depends on: $((Get-ServiceDependency $name) -join ', ')"
        }
    }
}

# --- 4. containerd's config --------------------------------------------------

# Adds $Path to the top-level imports of the config text (creating the key
# before the first table when there is none); returns $null when an entry
# already covers $Path (containerd expands * in imports).
function Add-Import([string] $Text, [string] $Path, [string] $ConfigDir) {
    $m = [regex]::Match($Text, '(?m)^[ \t]*imports[ \t]*=[ \t]*\[(?<list>[^\]]*)\]')
    if ($m.Success) {
        $list = $m.Groups['list'].Value
        # TOML literal strings ('C:\x') as they are, basic strings ("C:\\x") unescaped.
        foreach ($entry in [regex]::Matches($list, "'(?<literal>[^']*)'|`"(?<basic>[^`"]*)`"")) {
            $pattern = if ($entry.Groups['literal'].Success) { $entry.Groups['literal'].Value } else { $entry.Groups['basic'].Value -replace '\\\\', '\' }
            if (-not [System.IO.Path]::IsPathRooted($pattern)) { $pattern = Join-Path $ConfigDir $pattern }
            if ($Path -like $pattern) { return $null }
        }
        $list = $list.TrimEnd().TrimEnd(',')
        $separator = if ($list.Trim()) { ', ' } else { '' }
        $entries = "$list$separator'$Path'"
        return $Text.Substring(0, $m.Index) + "imports = [$($entries.Trim())]" + $Text.Substring($m.Index + $m.Length)
    }
    $table = [regex]::Match($Text, '(?m)^[ \t]*\[')
    $at = if ($table.Success) { $table.Index } else { $Text.Length }
    $line = "imports = ['$Path']`r`n"
    if ($at -gt 0 -and $Text.Substring(0, $at) -notmatch '\n\s*$') { $line = "`r`n$line" }
    if ($table.Success) { $line += "`r`n" }
    return $Text.Substring(0, $at) + $line + $Text.Substring($at)
}

function Merge-Config($Node) {
    Write-Step 'Adding winproc to containerd''s config'
    $confD = Join-Path $Node.Dir 'conf.d'
    $fragment = Join-Path $confD $FragmentFile
    New-Item -ItemType Directory -Force -Path $confD | Out-Null
    $from = if ($DefaultHandler) { $DefaultFragmentFile } else { $FragmentFile }
    Copy-Item (Join-Path $Source $from) $fragment -Force
    Write-Host "    $fragment"

    $exists = Test-Path $Node.Config
    $text = if ($exists) { [System.IO.File]::ReadAllText($Node.Config) } else { "version = 3`r`n" }
    if ($exists -and $text -notmatch '(?m)^[ \t]*version[ \t]*=') {
        Write-Warning "$($Node.Config) has no version line: containerd reads it as version 1, which has no imports. Add 'version = 3' (or migrate it: containerd config migrate)."
    }
    $updated = Add-Import $text $fragment (Split-Path -Parent $Node.Config)
    if ($null -eq $updated) {
        Write-Host "    $($Node.Config) already imports it"
        return
    }
    $backup = $null
    if ($exists) {
        $backup = "$($Node.Config).winproc-backup-$(Get-Date -Format yyyyMMddHHmmss)"
        Copy-Item $Node.Config $backup
        Write-Host "    backup $backup"
    }
    Write-Utf8File $Node.Config $updated
    # containerd's own loader must accept the result and see the handler.
    try {
        $dump = (Invoke-Native $Node.Containerd @('--config', $Node.Config, 'config', 'dump')) -join "`n"
        if ($dump -notmatch 'io\.containerd\.winproc\.v2' -or $dump -notmatch [regex]::Escape($SnapshotterPipe)) {
            throw "containerd config dump does not show the winproc handler and snapshotter."
        }
        if ($DefaultHandler -and $dump -notmatch "default_runtime_name\s*=\s*[`"']$Handler[`"']") {
            throw "containerd config dump does not show $Handler as the default handler (another import or config.toml sets default_runtime_name after it)."
        }
    } catch {
        if ($backup) { Copy-Item $backup $Node.Config -Force } else { Remove-Item $Node.Config }
        throw "containerd rejects the config with winproc's import; $($Node.Config) is restored. $_"
    }
    Write-Host "    $($Node.Config) imports $fragment"
}

# --- 5. containerd -----------------------------------------------------------

function Restart-Containerd($Node) {
    Write-Step 'Restarting containerd'
    Restart-Service containerd -Force
    Wait-Until {
        try { Invoke-Native $Node.Ctr @('version') | Out-Null; $true } catch { $false }
    } 60 'containerd does not answer 60 s after its restart: see its log.'
    $plugins = Invoke-Native $Node.Ctr @('plugins', 'ls')
    foreach ($p in 'io.containerd.snapshotter.v1\s+windowsfilter\s', 'io.containerd.differ.v1\s+windowsfilter-diff\s') {
        if (-not ($plugins | Where-Object { $_ -match "$p.*\sok\s*$" })) {
            throw "containerd did not load $($p -replace '\\s\+?', ' '): is $ServiceName running?`n$($plugins -join "`n")"
        }
    }
    Write-Host '    windowsfilter snapshotter and differ: ok'
    # The kubelet stopped with the services it depends on; started again,
    # it reads its dependencies and writes the preshutdown order anew.
    if ($Node.KubeletRan) {
        Start-Service $KubeletService
        Write-Host "    $KubeletService started again"
    }
}

# --- 6. the pause image ------------------------------------------------------

function Import-PauseImage($Node) {
    Write-Step "Building the pause image $PauseImage for Windows $($Node.Build)"
    $archive = Join-Path $env:TEMP 'winproc-pause.tar'
    try {
        Invoke-Native (Join-Path $InstallDir 'winproc.exe') @('image', 'pause',
            '-pause-exe', (Join-Path $InstallDir 'pause.exe'), '-wincat-exe', (Join-Path $InstallDir 'wincat.exe'),
            '-base-layout', $PauseBaseLayout, '-ref', $PauseImage, '-output', $archive) | ForEach-Object { Write-Host "    $_" }
        # Unpacked by winproc's differ, which refuses a build this node cannot run.
        Invoke-Native $Node.Ctr @('-n', $Namespace, 'images', 'import', '--platform', 'windows/amd64',
            '--snapshotter', 'windowsfilter', $archive) | ForEach-Object { Write-Host "    $_" }
    } finally {
        Remove-Item $archive -ErrorAction SilentlyContinue
    }
}

function Test-Setup($Node) {
    Write-Step 'Checking the setup with winproc doctor'
    # Exit status 1 when a check failed; its report says how to fix each.
    Invoke-Native (Join-Path $InstallDir 'winproc.exe') @('doctor', '-config', $Node.Config) | ForEach-Object { Write-Host "    $_" }
}

# --- 7. the RuntimeClass -----------------------------------------------------

function Publish-RuntimeClass($Node) {
    Write-Step "Applying the RuntimeClass for Windows $($Node.Build)"
    $hint = "From a machine with cluster access: winproc runtimeclass -build $($Node.Build) | kubectl apply -f -  (or kubectl apply -f runtimeclass\manifests\winproc-<release>.yaml)"
    $kubectl = Get-Command kubectl.exe -ErrorAction SilentlyContinue
    if ($SkipRuntimeClass -or -not $kubectl) {
        Write-Warning "Not applied here. $hint"
        return
    }
    $manifest = Join-Path $env:TEMP 'winproc-runtimeclass.yaml'
    try {
        $yaml = Invoke-Native (Join-Path $InstallDir 'winproc.exe') @('runtimeclass', '-build', $Node.Build)
        Write-Utf8File $manifest (($yaml -join "`n") + "`n")
        Invoke-Native $kubectl.Source @('apply', '-f', $manifest) | ForEach-Object { Write-Host "    $_" }
    } catch {
        Write-Warning "kubectl apply failed: $_`n$hint"
    } finally {
        Remove-Item $manifest -ErrorAction SilentlyContinue
    }
}

# --- 8. smoke test -----------------------------------------------------------

function Test-Handler {
    Write-Step "Smoke test: a pod with runtime handler $Handler"
    $crictl = Get-Command crictl.exe -ErrorAction SilentlyContinue
    if ($SkipSmokeTest -or -not $crictl) {
        Write-Warning 'Skipped (-SkipSmokeTest, or no crictl.exe on PATH).'
        return
    }
    $endpoint = 'npipe:' + ($ContainerdPipe -replace '\\', '/')
    $crictlArgs = @('--runtime-endpoint', $endpoint, '--image-endpoint', $endpoint, '--timeout', '120s')
    $dir = Join-Path $env:TEMP "winproc-smoke-$PID"
    New-Item -ItemType Directory -Force -Path (Join-Path $dir 'logs') | Out-Null
    $pod = @{
        metadata      = @{ name = 'winproc-smoke'; namespace = 'default'; uid = [guid]::NewGuid().ToString(); attempt = 0 }
        log_directory = (Join-Path $dir 'logs')
    }
    $podJson = Join-Path $dir 'pod.json'
    Write-Utf8File $podJson ($pod | ConvertTo-Json -Depth 4)
    $id = $null
    try {
        # The pod ID is the last line (crictl may warn before it).
        $id = @(Invoke-Native $crictl.Source ($crictlArgs + @('runp', '--runtime', $Handler, $podJson)))[-1].Trim()
        $state = (Invoke-Native $crictl.Source ($crictlArgs + @('inspectp', '-o', 'go-template', '--template', '{{.status.state}}', $id))) -join ''
        if ($state.Trim() -ne 'SANDBOX_READY') { throw "pod $id is $state, want SANDBOX_READY" }
        Write-Host "    pod $id is ready"
    } finally {
        if ($id) {
            Invoke-Native $crictl.Source ($crictlArgs + @('stopp', $id)) | Out-Null
            Invoke-Native $crictl.Source ($crictlArgs + @('rmp', $id)) | Out-Null
            Write-Host '    stopped and removed'
        }
        Remove-Item -Recurse -Force $dir -ErrorAction SilentlyContinue
    }
}

$node = Get-Node
Install-Binaries $node
Register-Snapshotter
Set-ServiceOrder $node
Merge-Config $node
Restart-Containerd $node
Import-PauseImage $node
Test-Setup $node
Publish-RuntimeClass $node
Test-Handler
Write-Step "winproc is installed. Pods select it with runtimeClassName (kubectl get runtimeclass)."
