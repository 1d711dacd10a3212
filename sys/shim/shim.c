/* See shim.h: one-line forwarders, compiled against the system's libfabric headers. */
#include "shim.h"

#include <stdlib.h>
#include <string.h>

#if FI_MAJOR_VERSION < 1 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION < 15)
#error "circulant needs libfabric >= 1.15 headers"
#endif

uint32_t circ_fi_header_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }

int circ_fi_info_data_progress(const struct fi_info *info)
{
	return info && info->domain_attr ? (int)info->domain_attr->data_progress
					 : (int)FI_PROGRESS_UNSPEC;
}

int circ_fi_info_control_progress(const struct fi_info *info)
{
#if FI_MAJOR_VERSION < 2
	return info && info->domain_attr ? (int)info->domain_attr->control_progress
					 : (int)FI_PROGRESS_UNSPEC;
#else
	/* 2.x selects progress by the data progress model alone. */
	return circ_fi_info_data_progress(info);
#endif
}

int circ_fi_info_set_auth_key(struct fi_info *info, const uint8_t *key, size_t len)
{
	uint8_t *copy;

	if (!info || !info->domain_attr || !key || !len)
		return -FI_EINVAL;
	copy = malloc(len);
	if (!copy)
		return -FI_ENOMEM;
	memcpy(copy, key, len);
	free(info->domain_attr->auth_key);
	info->domain_attr->auth_key = copy;
	info->domain_attr->auth_key_size = len;
	return 0;
}

struct fi_info *circ_fi_allocinfo(void) { return fi_allocinfo(); }
int circ_fi_close(struct fid *fid) { return fi_close(fid); }

int circ_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		   void *context)
{
	return fi_domain(fabric, info, domain, context);
}

int circ_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		     void *context)
{
	return fi_endpoint(domain, info, ep, context);
}

int circ_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		    void *context)
{
	return fi_av_open(domain, attr, av, context);
}

int circ_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		      uint64_t flags, void *context)
{
	return fi_av_insert(av, addr, count, fi_addr, flags, context);
}

int circ_fi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	return fi_av_remove(av, fi_addr, count, flags);
}

int circ_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		    void *context)
{
	return fi_cq_open(domain, attr, cq, context);
}

ssize_t circ_fi_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	return fi_cq_read(cq, buf, count);
}

ssize_t circ_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	return fi_cq_readerr(cq, buf, flags);
}

ssize_t circ_fi_cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond,
			 int timeout)
{
	return fi_cq_sread(cq, buf, count, cond, timeout);
}

const char *circ_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
				char *buf, size_t len)
{
	return fi_cq_strerror(cq, prov_errno, err_data, buf, len);
}

int circ_fi_cq_signal(struct fid_cq *cq) { return fi_cq_signal(cq); }

int circ_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
		   uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		   void *context)
{
	return fi_mr_reg(domain, buf, len, access, offset, requested_key, flags, mr, context);
}

void *circ_fi_mr_desc(struct fid_mr *mr) { return fi_mr_desc(mr); }
uint64_t circ_fi_mr_key(struct fid_mr *mr) { return fi_mr_key(mr); }
int circ_fi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags)
{
	return fi_mr_bind(mr, bfid, flags);
}
int circ_fi_mr_enable(struct fid_mr *mr) { return fi_mr_enable(mr); }
int circ_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags)
{
	return fi_ep_bind(ep, bfid, flags);
}
int circ_fi_enable(struct fid_ep *ep) { return fi_enable(ep); }
int circ_fi_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return fi_getname(fid, addr, addrlen);
}
int circ_fi_control(struct fid *fid, int command, void *arg)
{
	return fi_control(fid, command, arg);
}

ssize_t circ_fi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		      fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return fi_write(ep, buf, len, desc, dest_addr, addr, key, context);
}

ssize_t circ_fi_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context)
{
	return fi_writev(ep, iov, desc, count, dest_addr, addr, key, context);
}

ssize_t circ_fi_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return fi_writemsg(ep, msg, flags);
}

ssize_t circ_fi_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  uint64_t data, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
			  void *context)
{
	return fi_writedata(ep, buf, len, desc, data, dest_addr, addr, key, context);
}

ssize_t circ_fi_inject_write(struct fid_ep *ep, const void *buf, size_t len,
			     fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return fi_inject_write(ep, buf, len, dest_addr, addr, key);
}

ssize_t circ_fi_inject_writedata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				 fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	return fi_inject_writedata(ep, buf, len, data, dest_addr, addr, key);
}

ssize_t circ_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		     uint64_t addr, uint64_t key, void *context)
{
	return fi_read(ep, buf, len, desc, src_addr, addr, key, context);
}

ssize_t circ_fi_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	return fi_readmsg(ep, msg, flags);
}

ssize_t circ_fi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		     fi_addr_t dest_addr, void *context)
{
	return fi_send(ep, buf, len, desc, dest_addr, context);
}

ssize_t circ_fi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		     void *context)
{
	return fi_recv(ep, buf, len, desc, src_addr, context);
}

ssize_t circ_fi_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	return fi_recvmsg(ep, msg, flags);
}

ssize_t circ_fi_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr)
{
	return fi_inject(ep, buf, len, dest_addr);
}

ssize_t circ_fi_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		      fi_addr_t dest_addr, uint64_t tag, void *context)
{
	return fi_tsend(ep, buf, len, desc, dest_addr, tag, context);
}

ssize_t circ_fi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		      uint64_t tag, uint64_t ignore, void *context)
{
	return fi_trecv(ep, buf, len, desc, src_addr, tag, ignore, context);
}

ssize_t circ_fi_cancel(fid_t fid, void *context) { return fi_cancel(fid, context); }
