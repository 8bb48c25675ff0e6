/* A stand-in for libnvidia-ml.so.1, built by the tests with the machine's C compiler so
 * koord's real dlopen path runs without a GPU. It reports FAKE_NVML_GPUS GPUs (the
 * environment variable, else the compile-time -DFAKE_NVML_DEFAULT_GPUS=N, else 2; at most
 * 8); FAKE_NVML_MODEL sets the product name (default "NVIDIA A100-SXM4-80GB"). Xid
 * events: nvmlEventSetWait_v2 delivers "<gpu index> <xid>" from the file named by
 * -DFAKE_NVML_XID_FILE="path" (or that environment variable) once and removes it; index
 * -1 stands for an event NVML cannot place on one GPU. -DFAKE_NVML_NO_EVENTS makes every
 * GPU too old for events. Processes on GPUs (per-process memory and SM utilisation):
 * FAKE_NVML_PROCS (the environment variable, else -DFAKE_NVML_PROCS="…"), entries
 * "gpu:pid:memoryBytes:smPercent" separated by commas. Init is counted, as NVML's is.
 * Only the entry points koord calls exist, with NVML's ABI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_TIMEOUT 10
#define NVML_EVENT_XID_CRITICAL_ERROR 0x8ULL

typedef struct { int index; } fake_device;
typedef fake_device *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct { int unused; } fake_set;
typedef fake_set *nvmlEventSet_t;
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

static fake_device devices[8];
static fake_set the_set;
static int initialized = 0;

#ifndef FAKE_NVML_DEFAULT_GPUS
#define FAKE_NVML_DEFAULT_GPUS 2
#endif

static unsigned int count(void) {
    const char *v = getenv("FAKE_NVML_GPUS");
    int n = v ? atoi(v) : FAKE_NVML_DEFAULT_GPUS;
    if (n < 0) n = 0;
    if (n > 8) n = 8;
    return (unsigned int)n;
}

static nvmlReturn_t copy(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    for (int i = 0; i < 8; i++) devices[i].index = i;
    initialized++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
    if (initialized > 0) initialized--;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!n) return NVML_ERROR_INVALID_ARGUMENT;
    *n = count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!d || i >= count()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devices[i];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    char buf[64];
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(buf, sizeof buf, "GPU-00000000-0000-0000-0000-00000000000%d", d->index);
    return copy(uuid, len, buf);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    const char *m = getenv("FAKE_NVML_MODEL");
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    return copy(name, len, m ? m : "NVIDIA A100-SXM4-80GB");
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    if (!d || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    if (!d || !m) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = 85899345920ULL; /* 80 GiB */
    m->used = 1073741824ULL * (unsigned long long)(d->index + 1);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    if (!d || !u) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = 10u * (unsigned int)d->index;
    u->memory = 5u * (unsigned int)d->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    if (!d || !p) return NVML_ERROR_INVALID_ARGUMENT;
    memset(p, 0, sizeof *p);
    p->domain = 0;
    p->bus = 0x10u + (unsigned int)d->index;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    return copy(v, len, "535.104.05");
}

static const char *xid_file(void) {
    const char *e = getenv("FAKE_NVML_XID_FILE");
    if (e) return e;
#ifdef FAKE_NVML_XID_FILE
    return FAKE_NVML_XID_FILE;
#else
    return NULL;
#endif
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    if (!initialized) return NVML_ERROR_UNINITIALIZED;
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    *set = &the_set;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    return set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    if (!d || !set) return NVML_ERROR_INVALID_ARGUMENT;
#ifdef FAKE_NVML_NO_EVENTS
    (void)types;
    return NVML_ERROR_NOT_SUPPORTED;
#else
    return (types & NVML_EVENT_XID_CRITICAL_ERROR) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
#endif
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
    const char *path = xid_file();
    if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int waited = 0;; waited += 20) {
        FILE *f = path ? fopen(path, "r") : NULL;
        if (f) {
            int index = 0;
            unsigned long long xid = 0;
            int got = fscanf(f, "%d %llu", &index, &xid);
            fclose(f);
            unlink(path);
            if (got == 2 && index < (int)count()) {
                memset(data, 0, sizeof *data);
                data->device = index < 0 ? NULL : &devices[index];
                data->eventType = NVML_EVENT_XID_CRITICAL_ERROR;
                data->eventData = xid;
                return NVML_SUCCESS;
            }
        }
        if (waited >= timeout_ms) return NVML_ERROR_TIMEOUT;
        usleep(20000);
    }
}

typedef struct { unsigned int pid; unsigned long long mem; unsigned int sm; } fake_proc;

/* The processes FAKE_NVML_PROCS puts on GPU `index`, at most `max`; how many there are. */
static unsigned int procs_of(int index, fake_proc *out, unsigned int max) {
    const char *spec = getenv("FAKE_NVML_PROCS");
#ifdef FAKE_NVML_PROCS
    if (!spec) spec = FAKE_NVML_PROCS;
#endif
    unsigned int n = 0;
    while (spec && *spec) {
        int gpu = -1;
        unsigned int pid = 0, sm = 0;
        unsigned long long mem = 0;
        if (sscanf(spec, "%d:%u:%llu:%u", &gpu, &pid, &mem, &sm) == 4 && gpu == index) {
            if (n < max) {
                out[n].pid = pid;
                out[n].mem = mem;
                out[n].sm = sm;
            }
            n++;
        }
        spec = strchr(spec, ',');
        if (spec) spec++;
    }
    return n;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *infos) {
    fake_proc p[64];
    if (!d || !n) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int k = procs_of(d->index, p, 64);
    if (k > *n || (k > 0 && !infos)) {
        *n = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < k; i++) {
        memset(&infos[i], 0, sizeof infos[i]);
        infos[i].pid = p[i].pid;
        infos[i].usedGpuMemory = p[i].mem;
    }
    *n = k;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *u,
                                             unsigned int *n, unsigned long long lastSeen) {
    fake_proc p[64];
    (void)lastSeen;
    if (!d || !n) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int k = procs_of(d->index, p, 64);
    if (k == 0) return NVML_ERROR_NOT_FOUND;
    if (k > *n || !u) {
        *n = k;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < k; i++) {
        memset(&u[i], 0, sizeof u[i]);
        u[i].pid = p[i].pid;
        u[i].timeStamp = 1;
        u[i].smUtil = p[i].sm;
    }
    *n = k;
    return NVML_SUCCESS;
}
