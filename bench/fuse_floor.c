/* The least a libfuse3 low-level daemon can do per request: the bench's C floor.
 *
 * Usage: fuse_floor SOURCE CHUNK_SIZE MOUNTPOINT single|multi
 *
 * Serves big/0 ... big/N-1, the CHUNK_SIZE chunks of SOURCE, from one buffer read into
 * memory at start: every READ is answered at once with a pointer into that buffer
 * (fuse_reply_buf: no copy in the daemon). Entries and attributes are cached for an hour
 * and files are opened with keep_cache, as refmount does. "single" answers from one thread
 * (as pyfuse3 does), "multi" from libfuse's thread pool. Stops on SIGTERM or SIGINT and
 * unmounts. Built by the benchmark (bench/mounts.py) with: cc -O2 fuse_floor.c $(pkg-config --cflags
 * --libs fuse3).
 */
#define FUSE_USE_VERSION 34

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BIG_INODE 2
#define FIRST_FILE 3
#define TIMEOUT 3600.0

static char *data;
static size_t data_size, chunk_size, chunks;

static size_t chunk_length(size_t index) {
    size_t start = index * chunk_size;
    return start + chunk_size <= data_size ? chunk_size : data_size - start;
}

static int attributes(fuse_ino_t inode, struct stat *status) {
    memset(status, 0, sizeof(*status));
    status->st_ino = inode;
    if (inode == FUSE_ROOT_ID || inode == BIG_INODE) {
        status->st_mode = S_IFDIR | 0555;
        status->st_nlink = 2;
        return 0;
    }
    if (inode < FIRST_FILE || inode - FIRST_FILE >= chunks)
        return ENOENT;
    status->st_mode = S_IFREG | 0444;
    status->st_nlink = 1;
    status->st_size = (off_t)chunk_length(inode - FIRST_FILE);
    return 0;
}

static void floor_lookup(fuse_req_t request, fuse_ino_t parent, const char *name) {
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof(entry));
    if (parent == FUSE_ROOT_ID && strcmp(name, "big") == 0) {
        entry.ino = BIG_INODE;
    } else if (parent == BIG_INODE) {
        char *end;
        unsigned long index = strtoul(name, &end, 10);
        if (*name == '\0' || *end != '\0' || index >= chunks) {
            fuse_reply_err(request, ENOENT);
            return;
        }
        entry.ino = FIRST_FILE + index;
    } else {
        fuse_reply_err(request, ENOENT);
        return;
    }
    attributes(entry.ino, &entry.attr);
    entry.attr_timeout = entry.entry_timeout = TIMEOUT;
    fuse_reply_entry(request, &entry);
}

static void floor_getattr(fuse_req_t request, fuse_ino_t inode, struct fuse_file_info *info) {
    struct stat status;
    (void)info;
    if (attributes(inode, &status) != 0)
        fuse_reply_err(request, ENOENT);
    else
        fuse_reply_attr(request, &status, TIMEOUT);
}

static void floor_open(fuse_req_t request, fuse_ino_t inode, struct fuse_file_info *info) {
    if (inode < FIRST_FILE) {
        fuse_reply_err(request, EISDIR);
        return;
    }
    info->keep_cache = 1;
    fuse_reply_open(request, info);
}

static void floor_read(fuse_req_t request, fuse_ino_t inode, size_t size, off_t offset,
                       struct fuse_file_info *info) {
    size_t index = inode - FIRST_FILE, length = chunk_length(index);
    (void)info;
    if ((size_t)offset >= length) {
        fuse_reply_buf(request, NULL, 0);
        return;
    }
    if (size > length - (size_t)offset)
        size = length - (size_t)offset;
    fuse_reply_buf(request, data + index * chunk_size + offset, size);
}

static void floor_readdir(fuse_req_t request, fuse_ino_t inode, size_t size, off_t offset,
                          struct fuse_file_info *info) {
    char buffer[65536], name[32];
    size_t used = 0, count = inode == FUSE_ROOT_ID ? 1 : chunks;
    struct stat status;
    (void)info;
    if (size > sizeof(buffer))
        size = sizeof(buffer);
    for (size_t position = (size_t)offset; position < count; position++) {
        memset(&status, 0, sizeof(status));
        if (inode == FUSE_ROOT_ID) {
            strcpy(name, "big");
            status.st_ino = BIG_INODE;
            status.st_mode = S_IFDIR;
        } else {
            snprintf(name, sizeof(name), "%zu", position);
            status.st_ino = FIRST_FILE + position;
            status.st_mode = S_IFREG;
        }
        size_t entry = fuse_add_direntry(request, buffer + used, size - used, name, &status,
                                         (off_t)position + 1);
        if (entry > size - used)
            break;
        used += entry;
    }
    fuse_reply_buf(request, buffer, used);
}

static const struct fuse_lowlevel_ops operations = {
    .lookup = floor_lookup,
    .getattr = floor_getattr,
    .open = floor_open,
    .read = floor_read,
    .readdir = floor_readdir,
};

static int load(const char *path) {
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return -1;
    fseek(file, 0, SEEK_END);
    data_size = (size_t)ftell(file);
    fseek(file, 0, SEEK_SET);
    data = malloc(data_size ? data_size : 1);
    size_t got = data == NULL ? 0 : fread(data, 1, data_size, file);
    fclose(file);
    return got == data_size ? 0 : -1;
}

int main(int argc, char *argv[]) {
    if (argc != 5 || (strcmp(argv[4], "single") != 0 && strcmp(argv[4], "multi") != 0)) {
        fprintf(stderr, "usage: %s SOURCE CHUNK_SIZE MOUNTPOINT single|multi\n", argv[0]);
        return 2;
    }
    chunk_size = strtoul(argv[2], NULL, 10);
    if (chunk_size == 0 || load(argv[1]) != 0) {
        fprintf(stderr, "cannot read %s in chunks of %s bytes\n", argv[1], argv[2]);
        return 2;
    }
    chunks = (data_size + chunk_size - 1) / chunk_size;
    char *fuse_argv[] = {argv[0], "-o", "ro,default_permissions,fsname=fuse_floor", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    struct fuse_session *session = fuse_session_new(&args, &operations, sizeof(operations), NULL);
    if (session == NULL || fuse_set_signal_handlers(session) != 0)
        return 1;
    if (fuse_session_mount(session, argv[3]) != 0)
        return 1;
    int status;
    if (strcmp(argv[4], "multi") == 0) {
        struct fuse_loop_config *config = fuse_loop_cfg_create();
        status = fuse_session_loop_mt(session, config);
        fuse_loop_cfg_destroy(config);
    } else {
        status = fuse_session_loop(session);
    }
    fuse_session_unmount(session);
    fuse_remove_signal_handlers(session);
    fuse_session_destroy(session);
    free(data);
    return status == 0 ? 0 : 1;
}
