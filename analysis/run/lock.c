/* run/lock.c — one `memtally run` writes a directory at a time (run.h). */
#include "run/run.h"
#include "base/util.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

int
count_files(const char *dir) {
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, "memtally.", 9) && strstr(e->d_name, ".jsonl") != NULL;
	if (d)
		closedir(d);
	return n;
}

/* One `memtally run` writes a directory at a time: two at once mixed
 * their processes into one run.  The lock is flock(2) on LOCK_NAME in the
 * directory, held to the end of the run: the kernel releases it when its
 * owner exits or dies, so a killed run leaves no stale lock (the file may
 * stay; the next run takes it).  The ranks of one launcher's job
 * (`srun memtally run ...`: each rank runs memtally run) share it: they
 * hold it shared, under the job's key; so do the runs a run starts (a
 * script that runs `memtally run` under `memtally run`: MEMTALLY_RUN_JOB).  The file holds "pid key", for
 * the message and that check.  The last run out unlinks it. */
#define LOCK_NAME ".memtally-run.lock"
static int lock_fd = -1;

/* The launcher job this run is a rank of ("" when none): ranks of one
 * job write one directory together. */
static void
job_key(char *k, size_t n) {
	const char *mine = getenv("MEMTALLY_RUN_JOB"); /* a run inside a run: its key */
	const char *slurm = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID"),
		   *pmix = getenv("PMIX_NAMESPACE"), *ompi = getenv("OMPI_MCA_ess_base_jobid"),
		   *elastic = getenv("TORCHELASTIC_RUN_ID");
	if (mine && *mine)
		snprintf(k, n, "%s", mine);
	else if (slurm && *slurm)
		snprintf(k, n, "slurm:%s.%s", slurm, step ? step : "");
	else if (pmix && *pmix)
		snprintf(k, n, "pmix:%s", pmix);
	else if (ompi && *ompi)
		snprintf(k, n, "ompi:%s", ompi);
	else if (elastic && *elastic)
		snprintf(k, n, "torchelastic:%s", elastic);
	else
		k[0] = 0;
	for (char *c = k; *c; c++) /* one word on one line */
		if (*c <= ' ')
			*c = '_';
}

static void
lock_refused(int fd, const char *absout, const char *path) {
	char who[160] = "";
	ssize_t n = pread(fd, who, sizeof who - 1, 0);
	who[n > 0 ? n : 0] = 0;
	who[strcspn(who, " \n")] = 0;
	die(EXIT_USAGE, "%s is being written by another memtally run (pid %s, holding %s): name "
			"another --out, or wait for it to end",
	    absout, who[0] ? who : "?", path);
}

/* An earlier run's files would read as more processes (a later /bin/true
 * showed up as another "rank"): refused unless asked.  Checked by the run
 * that takes the lock alone, before the job's other ranks may join it
 * (their files are this run's). */
static void
no_earlier_files(const char *absout, int append) {
	int before = count_files(absout);
	if (before > 0 && !append)
		die(EXIT_USAGE, "%s already holds %d memtally file%s from an earlier run: name a new "
				"--out, remove them, or add --append to add this run's files to them",
		    absout, before, before == 1 ? "" : "s");
}

char *
run_lock(const char *absout, int append) {
	struct sb p = {0};
	char key[128];
	job_key(key, sizeof key);
	sb_printf(&p, "%s/" LOCK_NAME, absout);
	for (int tries = 0; tries < 100; tries++) {
		int fd = open(p.p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);
		if (fd < 0)
			die(EXIT_USAGE, "%s: %s", p.p, strerror(errno));
		int alone = !flock(fd, LOCK_EX | LOCK_NB);
		/* a rank of a job: the first rank holds it alone while it writes
		 * the job's key (srun starts the ranks at once); wait up to 2 s */
		int shared = !alone && key[0] && !flock(fd, LOCK_SH | LOCK_NB);
		for (int w = 0; !alone && key[0] && !shared && w < 200; w++) {
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
			shared = !flock(fd, LOCK_SH | LOCK_NB);
		}
		if (!alone && !shared)
			lock_refused(fd, absout, p.p);
		/* the file locked must still be the one at the path: the last
		 * run out unlinks it (run_unlock), maybe after we opened it */
		struct stat a, b;
		if (fstat(fd, &a) || stat(p.p, &b) || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
			close(fd);
			continue;
		}
		if (alone) {
			no_earlier_files(absout, append);
			if (!key[0]) /* the runs this one starts join it */
				snprintf(key, sizeof key, "run:%ld", (long)getpid());
			setenv("MEMTALLY_RUN_JOB", key, 1);
			char who[200];
			int n = snprintf(who, sizeof who, "%ld %s\n", (long)getpid(), key);
			if (ftruncate(fd, 0) || pwrite(fd, who, (size_t)n, 0) != n)
				(void)0; /* for the message and the job check only */
			flock(fd, LOCK_SH); /* the job's other ranks, the runs it starts, may join */
		} else { /* shared: with the ranks of our own job only */
			char who[200] = "";
			ssize_t n = pread(fd, who, sizeof who - 1, 0);
			who[n > 0 ? n : 0] = 0;
			who[strcspn(who, "\n")] = 0;
			const char *theirs = strchr(who, ' ');
			if (!theirs || strcmp(theirs + 1, key))
				lock_refused(fd, absout, p.p);
		}
		lock_fd = fd;
		return p.p;
	}
	die(EXIT_USAGE, "%s: cannot take the lock (it keeps changing)", p.p);
}

void
run_unlock(char *path) {
	if (!flock(lock_fd, LOCK_EX | LOCK_NB)) /* the last run out */
		unlink(path); /* while locked: a run that opened it retries */
	close(lock_fd);
	lock_fd = -1;
	free(path);
}
