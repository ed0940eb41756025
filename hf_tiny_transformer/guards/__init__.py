"""The guards: what keeps every command's promise that a mistake is one line and that nothing a user saved is lost.

- `runner`: the runner of every command (one line and an exit status for a bad argument, Ctrl-C, a full disk);
- `outputs`: the output guard, each destination checked against all the inputs before any work;
- `writing`: all-or-nothing writes of files and folders;
- `lock`: a training run's hold on its output folder;
- `loading`: the one model-folder loader;
- `text_files`: the text files a command reads (encodings, line ends, alignment).
"""
