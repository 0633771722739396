#ifndef NATTER_CEDITLINE_SHIM_H
#define NATTER_CEDITLINE_SHIM_H
// libedit's native interface (histedit.h). el_set, el_get and history are variadic, which Swift cannot call, so
// NatterTerminal reaches them through these wrappers. libedit is not thread-safe: one thread per EditLine.
//
// Why not the readline emulation (editline/readline.h), whose rl_callback_* interface looks made for this:
// in libedit 3.1-20221030 rl_line_buffer goes stale once a line outgrows libedit's first buffers (≈1 KiB; less
// with non-ASCII text) and rl_callback_read_char then writes a NUL through that stale pointer; rl_copy_text
// drops the last character; rl_replace_line("") does nothing; and rl_callback_read_char leaves character mode
// after each line. el_gets in EL_UNBUFFERED mode is what rl_callback_read_char is built on, without those.
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <wchar.h>
#include <histedit.h>

// glibc declares wcwidth only under _XOPEN_SOURCE, which a module header cannot define first.
extern int wcwidth(wchar_t character);

/// The columns `character` takes on a terminal in the current LC_CTYPE (-1 for control characters).
static inline int natter_wcwidth(unsigned int character) { return wcwidth((wchar_t)character); }

/// The width of the terminal on `fd` in columns, or 0 when `fd` is not a terminal (ioctl is variadic in C).
static inline int natter_terminal_columns(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) == 0) {
        return size.ws_col;
    }
    return 0;
}

/// A non-blocking, close-on-exec pipe (fcntl is variadic in C). Returns 0, or -1 with errno set.
static inline int natter_wake_pipe(int fds[2]) {
    if (pipe(fds) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(fds[i], F_SETFL, O_NONBLOCK) != 0 || fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
            close(fds[0]);
            close(fds[1]);
            return -1;
        }
    }
    return 0;
}

static inline FILE *natter_stdout(void) { return stdout; }

/// How many bytes can be read from `fd` without blocking (-1 on error). A terminal that polls readable with
/// none has hung up.
static inline int natter_readable_bytes(int fd) {
    int count = 0;
    if (ioctl(fd, FIONREAD, &count) != 0) return -1;
    return count;
}

typedef char *(*natter_prompt_function)(EditLine *);
typedef unsigned char (*natter_command_function)(EditLine *, int);

/// A history list keeping at most `size` entries and no two equal neighbours.
static inline History *natter_history_init(int size) {
    History *history_list = history_init();
    if (history_list != NULL) {
        HistEvent event;
        history(history_list, &event, H_SETSIZE, size);
        history(history_list, &event, H_SETUNIQUE, 1);
    }
    return history_list;
}

static inline void natter_history_enter(History *history_list, const char *line) {
    HistEvent event;
    history(history_list, &event, H_ENTER, line);
}

/// An editor on stdin/stdout in emacs mode, with signal handling (the terminal is restored on SIGINT, SIGTERM,
/// SIGTSTP…), `prompt` (with '\1' around sequences that take no columns), `history_list` for Up/Down and Ctrl-R,
/// `complete` bound to Tab, the keys readline users expect, then ~/.editrc. `client` is returned by
/// natter_el_client.
static inline EditLine *natter_el_init(void *client, natter_prompt_function prompt, History *history_list,
                                       natter_command_function complete) {
    EditLine *editor = el_init("natter", stdin, stdout, stderr);
    if (editor == NULL) return NULL;
    el_set(editor, EL_CLIENTDATA, client);
    el_set(editor, EL_EDITOR, "emacs");
    el_set(editor, EL_SIGNAL, 1);
    el_set(editor, EL_PROMPT_ESC, prompt, '\1');
    el_set(editor, EL_HIST, history, history_list);
    el_set(editor, EL_ADDFN, "natter-complete", "Complete the word before the cursor", complete);
    el_set(editor, EL_BIND, "^I", "natter-complete", NULL);
    el_set(editor, EL_BIND, "^R", "em-inc-search-prev", NULL);
    el_set(editor, EL_BIND, "\\e[1~", "ed-move-to-beg", NULL);
    el_set(editor, EL_BIND, "\\e[4~", "ed-move-to-end", NULL);
    el_set(editor, EL_BIND, "\\e[7~", "ed-move-to-beg", NULL);
    el_set(editor, EL_BIND, "\\e[8~", "ed-move-to-end", NULL);
    el_set(editor, EL_BIND, "\\e[H", "ed-move-to-beg", NULL);
    el_set(editor, EL_BIND, "\\e[F", "ed-move-to-end", NULL);
    el_set(editor, EL_BIND, "\\e[3~", "ed-delete-next-char", NULL);
    el_set(editor, EL_BIND, "\\e[1;5C", "em-next-word", NULL);
    el_set(editor, EL_BIND, "\\e[1;5D", "ed-prev-word", NULL);
    el_source(editor, NULL);
    return editor;
}

static inline void *natter_el_client(EditLine *editor) {
    void *client = NULL;
    el_get(editor, EL_CLIENTDATA, &client);
    return client;
}

/// Character-at-a-time mode on (raw terminal, prompt drawn, el_gets returns after each key) or off (terminal
/// restored). Turning it off and on again starts a fresh, empty line.
static inline void natter_el_set_unbuffered(EditLine *editor, int on) { el_set(editor, EL_UNBUFFERED, on); }

/// Forgets what libedit believes is on the screen and draws the prompt and the line again from the cursor.
static inline void natter_el_refresh(EditLine *editor) { el_set(editor, EL_REFRESH); }

/// The terminal width libedit works with (it tracks SIGWINCH), or 0.
static inline int natter_el_columns(EditLine *editor) {
    int columns = 0;
    if (el_get(editor, EL_GETTC, "co", &columns, NULL) != 0) return 0;
    return columns;
}

#endif
